"""Contained by construction (issue 54; docs/isolation.md, "Threat model"): the suite's own
process is the suite's, the sandbox binds only what is named, is decided once and fails
closed, the user's environment is the user's, nothing of the host is the sandbox's own, and
the suite's own inputs are bounded. Each test is a finding of the fifth round of probes; the
ones that start the suite run as root in CI and as nobody through the setpriv test of
tests/test_containment.py, which takes this file too."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading

import pytest

from gradient_conformance.conformance.divergence import write_atomically
from gradient_conformance.conformance.transports import kernel
from gradient_conformance.conformance.transports.confinement import (
    Confinement,
    _own_binds,
    bwrap_usable,
    own_files,
    program_files,
    refused,
)
from gradient_conformance.reports.records import from_json
from tests.conftest import ROOT, listening, suite

HERE = ROOT / "tests" / "hostile"
SANDBOX = bwrap_usable()
needs_bwrap = pytest.mark.skipif(not SANDBOX, reason="bubblewrap is not installed here, or "
                                 "cannot make a sandbox (make test installs it as root)")
WRONG = (ROOT / "tests" / "impls" / "last_bit_off.py").read_text()


# --- 1. the suite's process is the suite's ------------------------------------------------


def _hostile_folder(folder) -> None:
    """A wrong implementation beside a conftest.py that would make the suite ask the
    reference (and leave a mark), a pytest.ini that would collect only, and an mpmath.py
    that would end the suite's process at import."""
    (folder / "impl.py").write_text(WRONG)
    (folder / "conftest.py").write_text(
        "import pathlib\n\ndef pytest_configure(config):\n"
        "    pathlib.Path(__file__).with_name('conftest-ran').write_text('1')\n"
        "    config.option.impl = ['reference']\n")
    (folder / "pytest.ini").write_text("[pytest]\naddopts = --co\n")
    (folder / "mpmath.py").write_text("raise SystemExit('the folder\\'s mpmath.py')\n")


@pytest.mark.parametrize("how", ["command", "module"])
def test_the_implementation_s_folder_does_not_configure_the_suite(how, tmp_path):
    _hostile_folder(tmp_path)
    start = ([str(pathlib_bin("gradient-conformance"))] if how == "command" else
             [sys.executable, "-m", "gradient_conformance"])
    result = subprocess.run([*start, "--impl=impl.py", "-k", "exact_programs", "-q",
                             "--max-examples=5", "--no-shrink"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "FAILED" in output and "mpmath.py" not in output, output[-3000:]
    assert not (tmp_path / "conftest-ran").exists()


def pathlib_bin(name: str):
    import pathlib
    return pathlib.Path(sys.executable).with_name(name)


def test_plain_pytest_says_what_of_the_user_s_setup_it_loaded(tmp_path):
    """Under plain pytest, the user's conftest.py is loaded by design: the run says so."""
    (tmp_path / "impl.py").write_text(WRONG)
    (tmp_path / "conftest.py").write_text("FIXTURES = 1\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "gradient_conformance.conformance.checks",
         "--impl=impl.py", "-k", "exact_programs", "-q", "-p", "no:cacheprovider",
         "--conformance-max-examples=5"], cwd=tmp_path, capture_output=True, text=True,
        timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert f"not isolated from your pytest setup: this run loaded {tmp_path / 'conftest.py'}" \
        in output, output[-3000:]


# --- 2. the environment is the user's -----------------------------------------------------


def test_a_variable_the_implementation_asks_for_is_not_passed_on_its_word(tmp_path):
    (tmp_path / "impl.py").write_text(
        "import os\nfrom gradient_conformance.implementations.fast import build\n"
        "CAPABILITIES = {'environment': ['CI_JOB_TOKEN']}\n"
        "VERSION = os.environ.get('CI_JOB_TOKEN', 'not given')\n")
    code, output, _ = suite(str(tmp_path / "impl.py"), "-k", "exact_programs", "-q",
                            env={**os.environ, "CI_JOB_TOKEN": "glpat-hunter2"})
    assert code == 2, output[-3000:]
    assert "asks for the environment variable CI_JOB_TOKEN" in output
    assert "--pass-env=CI_JOB_TOKEN" in output and "hunter2" not in output


# --- 3, 4. explicit binds ------------------------------------------------------------------


def test_what_is_bound_is_named_never_a_home_or_a_shared_place(tmp_path):
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "impl.py").write_text("")
    (project / "server.py").write_text("")
    assert own_files("impl.py", str(project)) == [str(project / "impl.py")]
    assert own_files("pkg.sub", str(project)) == [str(project / "pkg")]
    assert own_files("gradient_conformance.implementations.fast", str(tmp_path)) == []
    words = program_files([sys.executable, "server.py", "--log", "../server.log", "."],
                          str(project))
    assert str(project / "server.py") in words and str(project) not in words
    assert all(not refused(p) for p in words), words
    for place in ("/", "/tmp", "/home", "/root", "/var", "/run", "/dev/shm",
                  os.path.expanduser("~")):
        assert refused(place), place
    assert not refused(str(project)) and not refused("/usr/lib")
    binds = _own_binds(["/tmp", os.path.expanduser("~"), "/", str(project / "impl.py")],
                       "/nonexistent-private")
    bound = [binds[k + 1] for k, a in enumerate(binds) if a == "--ro-bind"]
    assert bound == [str(project / "impl.py")], binds


@needs_bwrap
def test_nothing_near_the_implementation_is_reached_and_nothing_of_the_host_is_its_own(
        tmp_path, figures):
    """The implementation is a package in a project under /tmp (the host's, here), beside
    a .git/config with a token, a deploy/.env, a log beside the project and a Unix socket in
    its own folder and one in /tmp: only its package is bound, sockets hidden, so it reads
    and reaches none; no keyring, no user namespace, not root outside (the host's /dev/null
    is not its own), and at most TASK_LIMIT tasks (a control group's, or RLIMIT_NPROC's
    more). Wrong, it fails."""
    project = tmp_path / "project"
    package = project / "reaches"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text((HERE / "reaches.py").read_text())
    for helper in ("probes.py", "last_bit_off.py"):  # what it imports, in its own package
        shutil.copy(ROOT / "tests" / "impls" / helper, package / helper)
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("[remote]\n url = https://oauth2:glpat-TOKEN42@x\n")
    (project / "deploy").mkdir()
    (project / "deploy" / ".env").write_text("SECRET=deploy-secret\n")
    (project / "deploy" / ".env").chmod(0o600)
    (tmp_path / "server.log").write_text("sibling-log\n")
    mark = tmp_path / "host-tmp-mark"
    mark.write_text("host-tmp\n")
    heard: list[bytes] = []
    stop = threading.Event()
    servers = [listening(package / "own.sock", heard, stop),
               listening(tmp_path / "tmux.sock", heard, stop)]
    report = tmp_path / "r.json"
    env = {**os.environ, "HOSTILE_PROJECT": str(project), "HOSTILE_TMP_MARK": str(mark),
           "HOSTILE_SOCKETS": f"{package / 'own.sock'}:{tmp_path / 'tmux.sock'}"}
    try:
        code, output, _ = suite("reaches", "-k", "exact_programs", "-q", "--sandbox=bwrap",
                                f"--report-json={report}", "--pass-env=HOSTILE_PROJECT",
                                "--pass-env=HOSTILE_TMP_MARK", "--pass-env=HOSTILE_SOCKETS",
                                env=env, cwd=project)
    finally:
        stop.set()
        for server in servers:
            server.close()
    said = from_json(report.read_text())
    version = said.implementation["version"]
    figures(f"reaches as uid {os.geteuid()}: exit {code}; {version}")
    assert code == 1, output[-3000:]
    held = version.split(" | held: ")[1].split(", ")
    bounded = Confinement(1 << 30).resolved().bounded
    assert version.startswith("escaped: nothing"), version
    assert {"git token", "deploy env", "sibling log", "host tmp", "socket 0", "socket 1",
            "keyring", "add key", "dev null", "user namespace", "root only",
            "tasks"} <= set(held)
    assert heard == []
    for secret in ("TOKEN42", "deploy-secret", "sibling-log", "host-tmp"):
        assert secret not in output and secret not in report.read_text()
    assert f"at most {kernel.TASK_LIMIT} tasks" in said.confinement
    assert ("for its whole tree" in said.confinement) == bounded
    assert ("(RLIMIT_NPROC)" in said.confinement) != bounded


# --- 5. decided once, fail closed ---------------------------------------------------------


def test_a_decided_confinement_is_handed_on_and_never_decided_again(monkeypatch):
    decided = Confinement(1 << 30, "none", ("A",), ("/data",), bounded=False, decided=True)
    assert Confinement.from_text(decided.as_text()) == decided
    for bad in ('{"sandbox": "auto"}', "[]", Confinement(1 << 30).as_text()):
        with pytest.raises(ValueError):
            Confinement.from_text(bad)
    from gradient_conformance.conformance.transports import confinement, loading

    def probe():
        raise AssertionError("decided again")
    monkeypatch.setattr(confinement, "bwrap_usable", probe)
    impl = loading.load("gradient_conformance.implementations.fast", confinement=decided)
    try:
        assert impl.confinement == decided
    finally:
        impl.close()
    with pytest.raises(AssertionError, match="decided again"):
        Confinement(1 << 30, "auto").resolved()


@needs_bwrap
def test_a_sandbox_that_cannot_start_is_an_error_never_a_run_without_one(monkeypatch):
    """Decided `bwrap`, then bubblewrap gone: the start fails; nothing runs unsandboxed."""
    from gradient_conformance.conformance.transports import loading
    from gradient_conformance.conformance.transports.calling import LoadFailed
    decided = Confinement(1 << 30, "bwrap").resolved()
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(LoadFailed):
        loading.load("gradient_conformance.implementations.fast", confinement=decided)


# --- 6, 7. memory that counts, keyring -----------------------------------------------------


def test_the_seccomp_filter_refuses_keyrings_and_user_namespaces():
    program = kernel.seccomp_program("x86_64")
    assert program is not None and len(program) % 8 == 0
    assert kernel.seccomp_program("riscv64") is None
    assert kernel.seccomp_program("aarch64") is not None


@needs_bwrap
def test_memory_nothing_maps_still_counts_where_a_control_group_can_be_made(tmp_path):
    """A memfd written, never mapped, past the limit: with a control group the kernel kills
    the implementation's process (not the suite's), the case fails saying why, and the run
    ends with its report; without one, the report says memfds are not counted."""
    (tmp_path / "impl.py").write_text(
        "import os\nfrom gradient_conformance.implementations.fast import CAPABILITIES\n"
        "from gradient_conformance.implementations import fast\n"
        "def build(source):\n"
        "    fd = os.memfd_create('held')\n"
        "    for _ in range(48):\n"
        "        os.write(fd, b'x' * (16 << 20))\n"
        "    return fast.build(source)\n")
    report = tmp_path / "r.json"
    code, output, _ = suite(str(tmp_path / "impl.py"), "-k", "exact_programs", "-q",
                            "--memory-limit=256M", f"--report-json={report}")
    said = from_json(report.read_text())
    if not Confinement(256 << 20).resolved().bounded:
        assert "memfds not counted" in said.confinement
        return
    assert code == 1, output[-3000:]
    assert "for the memory limit of its control group" in output, output[-3000:]
    assert "for its whole tree" in said.confinement


# --- 8. the suite's own inputs --------------------------------------------------------------


def test_replay_of_a_case_that_would_never_end_or_fill_memory_is_an_error(tmp_path):
    nested = tmp_path / "nested.ir"
    nested.write_text("%o = buffer slot=0 dtype=f32 shape=[]\n%i = range 2147483647\n"
                      "%j = range 2147483647\nstore %o 1.0\nend %j\nend %i\n")
    many = tmp_path / "many.ir"
    many.write_text("".join(f"%b{k} = buffer slot={k} dtype=f32 shape=[16777216]\n"
                            for k in range(200)))
    for case, said in ((nested, "runs more than 4194304 statements"),
                       (many, "more than 67108864 elements together")):
        result = subprocess.run([sys.executable, "-m", "gradient_conformance", "replay",
                                 str(case), "--impl=gradient_conformance.implementations.fast"],
                                capture_output=True, text=True, timeout=120, cwd=tmp_path)
        output = result.stdout + result.stderr
        assert said in output and "Traceback" not in output, output[-3000:]


def test_what_the_implementation_writes_at_a_failed_load_is_quoted(tmp_path):
    (tmp_path / "impl.py").write_text(
        "import os, sys\nsys.stderr.write('\\x1b]52;c;aGFjaw==\\x07\\x1b[2J\\n301 passed\\n')\n"
        "sys.stderr.flush()\nos._exit(3)\n")
    code, output, _ = suite(str(tmp_path / "impl.py"), "-q")
    assert code == 2, output
    assert "\x1b" not in output and "\x07" not in output
    assert not re.search(r"^301 passed", output, re.M), output
    assert "| 301 passed" in output


def test_a_file_written_atomically_follows_no_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    target = tmp_path / "report.json"
    target.symlink_to(victim)
    for pid in range(os.getpid() - 2, os.getpid() + 3):  # the old, guessable names
        (tmp_path / f".report.json.{pid}.tmp").symlink_to(victim)
    write_atomically(target, "report\n")
    assert victim.read_text() == "mine\n"
    assert not target.is_symlink() and target.read_text() == "report\n"


# --- a second round, written outside against this design (issue 54's review) -------------


def _marker_module(folder, name: str) -> None:
    """A module of the standard library's or a dependency's name in the current folder that
    leaves a mark if any process of the suite imports it, and then steps aside."""
    (folder / f"{name}.py").write_text(
        "import pathlib, sys\n"
        f"pathlib.Path({str(folder)!r}, 'imported-{name}').write_text('1')\n"
        "sys.path = [p for p in sys.path if p not in ('', '.') and "
        f"pathlib.Path(p).resolve() != pathlib.Path({str(folder)!r})]\n"
        f"del sys.modules[{name!r}]\n"
        f"import {name}  # noqa\n")


def test_no_process_of_the_suite_imports_from_the_current_folder(tmp_path):
    """xdist's workers (`python -c`) and a mistyped option's `pytest --help` would import an
    `execnet.py`, a `pytest.py` or run a `conftest.py` of the current folder; the dev
    profile's Hypothesis would keep its examples in its `.hypothesis`."""
    (tmp_path / "impl.py").write_text(WRONG)
    for name in ("execnet", "multiprocessing"):
        _marker_module(tmp_path, name)
    (tmp_path / "conftest.py").write_text(
        f"import pathlib\npathlib.Path({str(tmp_path)!r}, 'imported-conftest').write_text('1')\n")
    code, output, _ = suite(str(tmp_path / "impl.py"), "-k", "exact_programs", "-q", "-n", "2",
                            "--profile=dev", cwd=tmp_path)
    assert code == 1, output[-3000:]
    code, output, _ = suite(str(tmp_path / "impl.py"), "--max-example=5", cwd=tmp_path)
    assert code == 2 and "did you mean --max-examples" in output, output[-3000:]
    assert not list(tmp_path.glob("imported-*")), list(tmp_path.glob("imported-*"))
    assert not (tmp_path / ".hypothesis").exists()


def test_a_module_that_leads_to_the_project_s_folder_binds_nothing(tmp_path):
    """`solution.py -> ..` would bind the folder above (other students' work, a grader's
    .env); `solution -> .` the current folder: each is a clear usage error, naming it."""
    grading = tmp_path / "grading"
    (grading / "s42").mkdir(parents=True)
    (grading / ".env").write_text("GRADER-KEY=hunter2\n")
    (grading / "s42" / "solution.py").symlink_to("..")
    code, output, _ = suite("solution", "-k", "exact_programs", "-q", cwd=grading / "s42")
    assert code == 2 and "which is no package of its own" in output, output[-3000:]
    assert "hunter2" not in output
    words = program_files(["/usr/bin/python3", "cfg"], str(tmp_path))
    (tmp_path / "cfg").symlink_to(grading / ".env")
    assert program_files(["/usr/bin/python3", "cfg"], str(tmp_path)) == words
    assert str(grading / ".env") not in words


def test_a_folder_database_reads_only_regular_files_of_a_bounded_size(tmp_path):
    from gradient_conformance.conformance.commands import fuzz_workers
    database = fuzz_workers.open_database(str(tmp_path / "db"))
    database.save(b"key", b"fine")
    folder = fuzz_workers._database(str(tmp_path / "db"))._key_path(b"key")
    os.mkfifo(folder / "a-fifo")
    (folder / "a-link").symlink_to("/dev/zero")
    (folder / "too-large").write_bytes(b"x" * (fuzz_workers.VALUE_BYTES + 1))
    assert list(database.fetch(b"key")) == [b"fine"]
    assert database.skipped == 3


def test_what_a_killed_suite_left_is_removed_by_the_next_start(tmp_path):
    import tempfile

    from gradient_conformance.conformance.transports.confinement import PRIVATE_PREFIX
    dead = 2 ** 22 + 12345  # above pid_max's default: no process has it
    left = pathlib.Path(tempfile.gettempdir()) / f"{PRIVATE_PREFIX}{dead}-x"
    left.mkdir()
    (left / "file").write_text("left")
    ours = pathlib.Path(tempfile.gettempdir()) / f"{PRIVATE_PREFIX}{os.getpid()}-y"
    ours.mkdir()
    try:
        from gradient_conformance.conformance.transports.confinement import remove_stale
        remove_stale()
        assert not left.exists() and ours.exists()
    finally:
        shutil.rmtree(left, ignore_errors=True)
        shutil.rmtree(ours, ignore_errors=True)
