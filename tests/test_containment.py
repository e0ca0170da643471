"""The implementation contained: its memory, its processes, its files and environment, and
everything read back from it or from disk. docs/isolation.md, "Isolation";
docs/fuzzing.md, "Fuzzing".

Each test runs a hostile implementation (tests/hostile/) or reads a hostile file that got
through before these limits, and looks at what it could do.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from gradient_conformance.conformance.commands import fuzz as fuzzing
from gradient_conformance.conformance.commands import fuzz_workers
from gradient_conformance.conformance.commands.suite import suite_arguments
from gradient_conformance.conformance.totals import Totals
from gradient_conformance.conformance.transports.confinement import (
    Confinement,
    bwrap_usable,
    default_memory_limit,
    parse_size,
    shown_size,
)
from gradient_conformance.reports import matrix
from gradient_conformance.reports.records import (
    Divergence,
    divergence_from_dict,
    divergence_to_dict,
    from_json,
    loads,
)
from tests.conftest import ROOT, listening, suite

HERE = ROOT / "tests" / "hostile"
IMPLS = ROOT / "tests" / "impls"  # bound for the impls that import a sibling
SANDBOX = bwrap_usable()
needs_bwrap = pytest.mark.skipif(not SANDBOX, reason="bubblewrap is not installed here, or "
                                 "cannot make a sandbox (make test installs it as root)")


def _alive(marker: str) -> str:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout


# --- processes ----------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_a_detached_grandchild_is_killed_before_it_can_write(sandbox, tmp_path):
    """It forks twice, calls setsid(), drops the suite's token and waits to overwrite the
    report: as subreaper (no sandbox) or through the PID namespace, the suite ends it."""
    report, marker = tmp_path / "r.json", f"hostile-grandchild-{os.getpid()}-{time.time_ns()}"
    env = {**os.environ, "HOSTILE_TARGET": str(report), "HOSTILE_MARKER": marker}
    code, output, _ = suite(str(HERE / "leaves_a_grandchild.py"), "-k", "exact_programs",
                            "-q", f"--report-json={report}", f"--sandbox={sandbox}",
                            "--pass-env=HOSTILE_TARGET", "--pass-env=HOSTILE_MARKER", env=env)
    assert code == 0, output[-3000:]
    # The shell, and the sleep it runs, at least.
    killed = re.search(r"(\d+) process(?:es)? it left running killed", output)
    assert killed and int(killed.group(1)) >= 1, output[-3000:]
    # The shell that would write holds the marker until its last `sleep 60`: once no process
    # has it, nothing is left to write (a kill may take a moment to land).
    for _ in range(50):
        if _alive(marker) == "":
            break
        time.sleep(0.1)
    assert _alive(marker) == "", "the grandchild outlived the suite"
    assert "tampered" not in report.read_text()
    assert from_json(report.read_text()).confinement.endswith(killed.group())


@needs_bwrap
def test_the_sandbox_keeps_files_and_secrets_out_of_reach(tmp_path):
    planted = ROOT / "conformance" / "checks" / "conftest_planted.py"
    report = tmp_path / "r.json"
    env = {**os.environ, "HOSTILE_TARGET": str(tmp_path), "HOSTILE_PLANT": "1",
           "SECRET_TOKEN": "hunter2"}
    try:
        code, output, _ = suite(str(HERE / "writes_everywhere.py"), "-k", "exact_programs",
                                "-q", f"--report-json={report}", "--pass-env=HOSTILE_TARGET",
                                "--pass-env=HOSTILE_PLANT", "--sandbox=bwrap", env=env,
                                cwd=tmp_path)
        assert not planted.exists() and not (tmp_path / "planted.txt").exists()
    finally:
        planted.unlink(missing_ok=True)
    assert code == 0, output[-3000:]
    said = from_json(report.read_text())
    version = said.implementation["version"]
    # The user's folder is not in the sandbox at all; the checks' folder is, read-only.
    assert "could not write planted.txt: No such file or directory" in version
    assert "could not write conftest_planted.py: Read-only file system" in version
    assert "secret not given" in version and f"cwd {tmp_path}" not in version
    assert said.confinement.startswith("in a bubblewrap sandbox")


def test_without_a_sandbox_the_environment_is_still_scrubbed_and_memory_limited(tmp_path):
    """Under -n 2, each of the two shares the default; the report says the limit they had."""
    report = tmp_path / "r.json"
    env = {**os.environ, "HOSTILE_TARGET": "/nonexistent", "HOSTILE_PLANT": "1",
           "SECRET_TOKEN": "hunter2"}  # neither passed on
    code, output, _ = suite(str(HERE / "writes_everywhere.py"), "-k", "exact_programs", "-q",
                            f"--report-json={report}", "--sandbox=none", "-n", "2", env=env,
                            cwd=tmp_path)
    assert code == 0, output[-3000:]
    said = from_json(report.read_text())
    version = said.implementation["version"]
    assert "secret not given" in version and f"cwd {tmp_path}" not in version
    assert "hunter2" not in output
    # Said at the start: what a run without the sandbox leaves open (a SIGSTOP, say).
    assert "contained: with no sandbox (it runs as your user: it can read and write what " \
        "you can, and signal the suite; a SIGSTOP it sends stops the run for good)" in output
    assert f"data limit {default_memory_limit(2)}" in version
    assert f"memory limited to {shown_size(default_memory_limit(2))}" in said.confinement


def test_memory_past_the_limit_is_a_failure_and_a_fresh_worker(tmp_path):
    code, output, _ = suite(str(HERE / "allocates.py"), "-k", "exact_programs or op_form_recip",
                            "-q", "--memory-limit=1G", "--max-examples=3",
                            "--conformance-load-timeout=30")
    assert code == 1, output[-3000:]
    assert "it ran out of memory" in output
    started_again = re.search(r"started again (\d+) times? after running out of memory", output)
    assert started_again and int(started_again.group(1)) >= 2, output[-3000:]


def test_sizes_and_a_demanded_sandbox_are_usage_errors():
    assert parse_size("1.5G") == 3 << 29 and parse_size("512M") == 512 << 20
    for bad in ("lots", "12Q", "1K"):
        with pytest.raises(ValueError):
            parse_size(bad)
    with pytest.raises(ValueError, match="sandbox must be one of"):
        Confinement(1 << 30, "docker")
    code, output, _ = suite(str(HERE / "identity.py"), "--memory-limit=lots", "-q")
    assert code == 2 and "--memory-limit=lots" in output and "not a size" in output


# --- interrupted runs ---------------------------------------------------------------------


def _interrupted(impl: str, after: float, tmp_path, *args, once: str = "") -> tuple[int, str]:
    """SIGINT `after` seconds after the start, or after the output first shows `once` (so
    that a loaded machine's slow start does not move the moment)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gradient_conformance", f"--impl={impl}", "-p",
         "no:cacheprovider", *args], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:  # by chunks: pytest names a check before the line ends
        assert process.stdout is not None
        while chunk := os.read(process.stdout.fileno(), 4096):
            lines.append(chunk.decode(errors="replace"))
            if once and once in "".join(lines[-2:]):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if once:
        assert seen.wait(300), "".join(lines)[-3000:]
    time.sleep(after)
    # A run that ended before the signal would test nothing of Ctrl-C (a fast machine ended
    # `-k exact_programs` in 1.1 s, before the signal at 2 s).
    assert process.poll() is None, "the run ended before the signal:\n" + "".join(lines)[-3000:]
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    reader.join(timeout=60)
    return process.returncode, "".join(lines)


def test_ctrl_c_in_the_first_check_writes_a_report_that_says_so(tmp_path):
    # -v names each check as it begins: the signal comes 3 s into the first.
    code, output = _interrupted(str(HERE / "c_loop.py"), 3, tmp_path, "-v", "-k",
                                "exact_programs or op_form_recip", "--case-timeout=60",
                                "--report=r.html", "--report-json=r.json", once="::test_")
    assert code == 2, output[-3000:]
    report = from_json((tmp_path / "r.json").read_text())
    assert report.interrupted.startswith("interrupted")
    assert "did not run" in report.interrupted and "test_case_file" in report.interrupted
    page = (tmp_path / "r.html").read_text()
    assert "This run was\ncut short" in page and "every check agreed" not in page
    assert "this run was cut short" in output


@pytest.mark.parametrize("after", [0.3, 1.0, 2.0])
def test_ctrl_c_at_start_up_is_no_traceback(after, tmp_path):
    code, output = _interrupted("gradient_conformance.implementations.fast", after, tmp_path,
                                "-q", "-k", "exact_programs", "--max-examples=100000")
    # On a loaded machine the signal may come before Python has its handler: then the
    # process ends by the signal itself, which is clean too.
    assert code in (2, -signal.SIGINT), output[-3000:]
    assert "Traceback" not in output, output[-3000:]


# --- what is read back --------------------------------------------------------------------


def _record(**changes) -> dict:
    d = Divergence(check="test_x", test_id="test_x", summary="s", source="%a = ...",
                   case_text="%a = buffer slot=0 dtype=f32\n", case_name="test_x-1.ir",
                   signature=("test_x", "add", "bits"), statements=1)
    return {**divergence_to_dict(d), **changes}


def test_a_record_names_no_path_its_case_file_is_named_by_its_content(tmp_path):
    """A fuzzing session's record (another process's data) with a case name that climbs
    out of the store: the driver stores the case under the name its content gives."""
    out = tmp_path / "out"
    progress = fuzzing.Progress(out, "impl")
    record = {"check": "test_x", "outcome": "failed", "cases": 1,
              "divergence": _record(case_name="../../../escaped.ir")}
    progress.take((0, "record", record))
    written = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert not (tmp_path / "escaped.ir").exists() and not any(
        "escaped" in str(p) for p in written)
    assert any(str(p).endswith(".ir") and p.parts[0] == "divergences" for p in written)


@pytest.mark.parametrize("record", [
    [], {"check": 3, "outcome": "failed"}, {"check": "x", "outcome": "failed", "cases": "7"},
    {"check": "x", "outcome": "passed", "ops": {"add": "many"}},
    {"check": "x", "outcome": "passed", "figures": {"f": {"max_x": "big"}}},
    {"check": "x", "outcome": "failed", "divergence": {"check": "x"}},
    {"check": "x", "outcome": "failed", "divergence": _record(signature=[1, 2, 3])},
    {"check": "x", "outcome": "failed", "divergence": _record(elements=[{"slot": "0"}])},
    {"check": "x", "outcome": "passed", "ended": [-1, 0]},
])
def test_a_malformed_record_is_refused_whole(record):
    totals = Totals()
    with pytest.raises(ValueError):
        totals.take(record)
    assert totals.outcomes == {} and totals.divergences == []


def test_a_fuzz_driver_leaves_out_a_malformed_record_and_says_so(tmp_path):
    progress = fuzzing.Progress(tmp_path / "out", "impl")
    progress.take((1, "record", {"check": "x", "outcome": "failed", "cases": "lots"}))
    progress.take((1, "hello", ["not", "a", "dict"]))
    progress.take((1, "done", "zero"))
    assert progress.found == 0 and progress.implementation == {} and progress.exits == []
    assert any("left out" in p and "'cases'" in p for p in progress.report().notes)


def test_json_nested_deep_is_a_clear_error_not_a_recursion_error():
    with pytest.raises(ValueError, match="nested too deep"):
        loads("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError):
        from_json('{"schema": "gradient-conformance-report/1", "implementation": '
                  + "[" * 100_000 + "]" * 100_000 + "}")
    # Deep enough to walk into a RecursionError later, shallow enough for json to read:
    # refused at the reading, whatever reads it next (a report, a reply's capabilities).
    with pytest.raises(ValueError, match="nested more than 64 deep"):
        loads("[" * 600 + "]" * 600)
    assert loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(ValueError, match="nested too deep"):
        from gradient_conformance.reference.tape import load_tape_case
        load_tape_case("[" * 100_000 + "]" * 100_000)


def test_bad_files_in_a_store_are_named_and_left_out(tmp_path, capsys):
    """A record of valid JSON but the wrong shape, a link, and a history line whose
    signatures are a list: each later fuzz run and `report` goes on, naming the file."""
    out = tmp_path / "out"
    good = out / "divergences" / "aaaa" / "0001-good.json"
    good.parent.mkdir(parents=True)
    good.write_text(json.dumps(_record()))
    (out / "divergences" / "bbbb").mkdir()
    (out / "divergences" / "bbbb" / "0001-wrong.json").write_text('{"check": ["x"]}')
    (out / "divergences" / "bbbb" / "0002-deep.json").write_text("[" * 50_000)
    (out / "divergences" / "bbbb" / "0003-link.json").symlink_to(good)
    (out / "history.jsonl").write_text(
        '{"started": "2026-01-01", "spec": "impl", "signatures": ["x"]}\n'
        '{"started": "2026-01-02", "spec": "impl", "signatures": {"aaaa": "test_x / add"}}\n')
    problems: list[str] = []
    assert [d.summary for d in fuzzing.stored(out, problems)] == ["s"]
    assert len(problems) == 3 and all("left out of the store" in p for p in problems)
    assert "0001-wrong.json" in problems[0]
    assert [r["started"] for r in fuzzing.read_history(out)] == ["2026-01-02"]
    report = fuzzing.report_from_folders([out])
    assert len(report.divergences) == 1 and sum("left out" in n for n in report.notes) == 3


def test_a_session_s_messages_must_carry_the_run_s_nonce():
    assert fuzz_workers._message(0, json.dumps(["n1", "done", 0]).encode(), "n1") == (0, "done", 0)
    for forged in (["n2", "done", 0], ["n1", "exec", "rm -rf ~"], "n1", [], b"\xff"):
        data = forged if isinstance(forged, bytes) else json.dumps(forged).encode()
        assert fuzz_workers._message(0, data, "n1") is None


def test_a_record_forged_into_a_task_s_stdout_is_not_taken(tmp_path):
    """The implementation writes a made-up record into every pipe of its parent (a fuzzing
    task's stdout among them), with no sandbox to stop it: the driver takes only lines that
    carry the task's nonce."""
    arguments = suite_arguments([f"--impl={HERE / 'forges_records.py'}", "--case-timeout=10",
                                 "--profile=dev", "-p", "no:cacheprovider", "-q",
                                 "--sandbox=none", f"--cases-out={tmp_path / 'cases'}"])
    messages = fuzz_workers.run_task(0, arguments, {"batch": 3, "rounds": 1, "database": None,
                                                    "checks": ["test_gradients_bit_for_bit"]},
                                     60, str(tmp_path))
    kinds = [m[1] for m in messages]
    assert "done" in kinds and "record" in kinds, messages
    # (Its line may be quoted, as the junk it wrote into its own replies; never taken.)
    divergences = [m[2].get("divergence") or {} for m in messages if m[1] == "record"]
    assert not any(d.get("test_id") == "forged" for d in divergences), divergences


def test_huge_database_values_are_left_out(tmp_path):
    from hypothesis.database import DirectoryBasedExampleDatabase
    inner = DirectoryBasedExampleDatabase(str(tmp_path))
    inner.save(b"key", b"\x00\x01")
    inner.save(b"key", b"\xff" * (1 << 20))
    database = fuzz_workers.bounded(inner)
    assert list(database.fetch(b"key")) == [b"\x00\x01"] and database.skipped == 1


def test_the_driver_stops_sessions_at_the_deadline(monkeypatch):
    """A session that never ends (a batch stuck on a slow database value, say) is stopped
    STOP_GRACE seconds after the run's deadline, and said to have been. (The grace is cut to
    1 s here: what is tested is that the driver stops the session, not the 10 s it waits.)"""
    monkeypatch.setattr(fuzz_workers, "STOP_GRACE", 1.0)
    taken: list = []
    started = time.monotonic()
    fuzz_workers.in_processes(1, [], {"deadline": time.time() + 0.5}, taken.append,
                              lambda: None, target=_never_done)
    assert time.monotonic() - started < fuzz_workers.STOP_GRACE + 30
    assert any(m[1] == "failed" and "still running 1 s after the run's deadline" in m[2]
               for m in taken), taken


def _never_done(worker, arguments, loop, channel, nonce) -> None:
    time.sleep(600)


def _replayed(case: pathlib.Path, text: str) -> subprocess.CompletedProcess:
    case.write_text(text)
    return subprocess.run([sys.executable, "-m", "gradient_conformance", "replay", str(case),
                           "--impl=gradient_conformance.implementations.fast"],
                          capture_output=True, text=True, timeout=120)


def test_a_huge_declared_buffer_is_refused_before_anything_is_allocated(tmp_path):
    run = _replayed(tmp_path / "huge.ir", "%a = buffer slot=0 dtype=f32 shape=[20000,20000]\n"
                    "%x = load %a\nstore %a %x\n#: run-error\n")
    assert run.returncode == 2 and "line 1" in run.stderr and "16777216" in run.stderr
    assert "Traceback" not in run.stderr


def test_replay_shows_a_case_s_escapes_rather_than_sending_them(tmp_path):
    run = _replayed(tmp_path / "escape.ir", "%a = buffer slot=0 dtype=f32\n%x = load %a\n"
                    "store %a %x\n#: error invalid \x1b[2J\x1b]0;pwned\x07\n")
    assert "\x1b" not in run.stdout and "\\x1b[2J" in run.stdout, run.stdout


def test_the_matrix_markdown_is_inert_whatever_a_system_calls_itself():
    name = "evil <img src=x onerror=alert(1)>\n| injected | row |"
    assert "<img" not in matrix.md(name) and "\n" not in matrix.md(name)
    assert matrix.md(name).count("|") == matrix.md(name).count("\\|")


def test_a_linked_gitignore_is_replaced_not_written_through(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (tmp_path / ".gradient-conformance").mkdir()
    (tmp_path / ".gradient-conformance" / ".gitignore").symlink_to(target)
    code, output, _ = suite(str(HERE / "identity.py"), "-k", "exact_programs", "-q",
                            cwd=tmp_path)
    assert code == 1, output[-2000:]  # it fails: the run went through
    assert target.read_text() == "keep me\n", output[-2000:]
    assert (tmp_path / ".gradient-conformance" / ".gitignore").read_text() == "*\n"
    assert not (tmp_path / ".gradient-conformance" / ".gitignore").is_symlink()


def test_a_report_read_back_keeps_no_path_of_a_record():
    d = divergence_from_dict(_record(case_name="/etc/passwd"))
    assert d.case_name.startswith("test_x-") and "/" not in d.case_name
    assert pathlib.PurePath(d.case_name).name == d.case_name


def test_fuzz_passes_its_containment_on_to_every_session():
    """--jobs 2 share the machine's default; a size is checked once, as fuzz's arguments are
    read (a usage error, as the suite's own option is). The sandbox goes on as decided
    (`auto` never does: each session would decide it again)."""
    import argparse
    parser = argparse.ArgumentParser()
    fuzzing.add_parser(parser.add_subparsers())
    args = parser.parse_args(["fuzz", "--impl=x", "--minutes=1", "--jobs=2", "--sandbox=auto",
                              "--pass-env=A", "--pass-env=B", "--sandbox-bind=/data"])
    assert fuzzing.contained(args, "bwrap") == (
        "--sandbox=bwrap", "--pass-env=A", "--pass-env=B", "--sandbox-bind=/data",
        f"--memory-limit={default_memory_limit(2)}")
    with pytest.raises(SystemExit):
        parser.parse_args(["fuzz", "--impl=x", "--minutes=1", "--memory-limit=lots"])


def test_a_worker_whose_memory_grew_past_the_limit_starts_afresh():
    """Where a control group bounds the tree (as root), the kernel kills it as it loads, and
    the load fails saying why; elsewhere its resident memory is seen after a case."""
    code, output, _ = suite(str(HERE / "maps_a_file.py"), "-k", "exact_programs", "-q",
                            "--memory-limit=200M", examples=30)
    if Confinement(200 << 20).resolved().bounded:
        assert code == 2 and "for the memory limit of its control group" in output, \
            output[-3000:]
        return
    # Every answer right, but its memory too much at every start: the check stops after
    # ten restarts, and fails saying so.
    assert code == 1 and "started again 10 times in this check" in output, output[-3000:]
    grown = re.search(r"started again (\d+) times? after running out of memory or growing "
                      r"past the limit", output)
    assert grown and int(grown.group(1)) >= 1, output[-3000:]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="tests/impls/flushing.py sets MXCSR, which x86-64 alone has")
@pytest.mark.parametrize("examples", [5, pytest.param(None, id="ci", marks=pytest.mark.slow)])
def test_a_flushing_process_gets_only_its_own_divergences(examples):
    """The reference in a worker that set flush-to-zero, denormals-are-zero and rounding
    upwards at import: its results are exact whatever that environment, so the suite's code
    that runs beside it must add no divergence (15 checks failed when `decode` and `encode`
    went through the CPU's f32 conversion, 2026-12-05). docs/isolation.md, "Isolation".
    The first tier runs every check at 5 generated cases (the case files and enumerations,
    which hold the subnormals, whole); the second, the ci profile."""
    status, output, _ = suite(str(ROOT / "tests" / "impls" / "flushing.py"), "--profile=ci",
                              "-q", examples=examples, shrink=examples is None)
    assert status == 0, output[-6000:]
    assert " failed" not in output and "tape" in output, output[-6000:]


def _escape_attempt(tmp_path, sandbox: str = "bwrap"):
    """escapes.py run through one check, with a secret, a Unix socket served outside, and a
    home of the user's to reach: (exit, output, what it said of itself, what the socket
    heard)."""
    secret = tmp_path / ".env"
    secret.write_text("TOKEN=hunter2-secret\n")
    secret.chmod(0o600)
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    heard: list[bytes] = []
    stop = threading.Event()
    server = listening(tmp_path / "tmux.sock", heard, stop)
    report = tmp_path / "r.json"
    env = {**os.environ, "HOSTILE_TARGET": str(tmp_path), "HOSTILE_SECRET": str(secret),
           "HOSTILE_SOCKET": str(tmp_path / "tmux.sock"), "HOSTILE_HOME": str(home)}
    planted = ROOT / "conformance" / "checks" / "conftest_planted.py"
    try:
        code, output, _ = suite(
            str(ROOT / "tests" / "impls" / "escapes.py"), "-k", "exact_programs", "-q",
            "--max-examples=5", "--no-shrink", f"--report-json={report}", f"--sandbox={sandbox}",
            "--memory-limit=256M", *(f"--pass-env={n}" for n in (
                "HOSTILE_TARGET", "HOSTILE_SECRET", "HOSTILE_SOCKET", "HOSTILE_HOME")),
            f"--sandbox-bind={IMPLS}", env=env, cwd=tmp_path)
        assert not planted.exists(), "a module was planted in the installed checks"
    finally:
        planted.unlink(missing_ok=True)
        stop.set()
        server.close()
    said = from_json(report.read_text()).implementation["version"] if report.exists() else ""
    return code, output, said, heard


@needs_bwrap
def test_the_sandbox_holds_as_root_and_as_anyone_from_every_side(tmp_path, figures):
    """docs/isolation.md, "Isolation" (The sandbox): as root (CI's user) the implementation
    runs as nobody with no capability, so it cannot remount / read-write; it sees only the
    system, its interpreter and its own files, so no Unix socket outside, no file of the
    user's, no secret, no home; its /dev/shm is a tmpfs of a quarter of its memory limit.
    A wrong implementation that tries all of this still fails (exit 1), and nothing of the
    user's is touched. Run as root by CI, and by tests/test_containment.py's setpriv test
    as an unprivileged user."""
    started = time.perf_counter()
    code, output, said, heard = _escape_attempt(tmp_path)
    figures(f"escapes as uid {os.geteuid()}: exit {code} in "
            f"{time.perf_counter() - started:.1f} s; {said}")
    assert code == 1, output[-3000:]
    assert said.startswith("escaped: nothing | held: "), said
    assert said.split(" | held: ")[1].split(", ") == [
        "caps", "root", "remount", "write", "plant", "secret", "shadow", "keys", "socket",
        "home", "shm"], said
    assert heard == [] and not (tmp_path / "planted.txt").exists()
    assert "hunter2" not in output and "hunter2" not in (tmp_path / "r.json").read_text()


def _viewable_by_anyone(paths: list[str]) -> list[str]:
    """bubblewrap arguments that let an unprivileged user reach `paths` (the interpreter's
    installation, the checkout): each folder above them that others may not enter (root's
    home, 0700) replaced by an empty tmpfs with the paths bound read-only into it."""
    blocked: set[str] = set()
    for path in paths:
        parts = pathlib.Path(path).parents
        for folder in reversed([str(p) for p in parts if str(p) != "/"]):
            if not os.stat(folder).st_mode & 0o001:
                blocked.add(folder)
                break
    outermost = sorted(b for b in blocked if not any(b.startswith(o + "/") for o in blocked))
    arguments = [a for b in outermost for a in ("--perms", "0755", "--tmpfs", b)]
    for path in paths:
        for b in (b for b in outermost if path.startswith(b + "/")):
            between = pathlib.Path(path).relative_to(b).parents
            arguments += [a for p in reversed([str(pathlib.Path(b) / q) for q in between][:-1])
                          for a in ("--perms", "0755", "--dir", p)]
            arguments += ["--ro-bind", path, path]
    return arguments


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="run as root (as CI is), it runs the battery "
                    "as nobody; run as anyone else, the battery above is that user's run")
@needs_bwrap
def test_the_battery_holds_as_an_unprivileged_user_too(figures):
    """docs/isolation.md, "Isolation": the containment tests and the hostile battery (the
    first tier's), as root (this run) and as nobody (setpriv --reuid=65534 --regid=65534
    --clear-groups): every test passes, none skipped, so the sandbox was made and held for
    an unprivileged user too."""
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is missing: the unprivileged run cannot be made")
    needed = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, str(ROOT))})
    started = time.perf_counter()
    result = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", *_viewable_by_anyone(needed), "--",
         "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         "env", "HOME=/tmp", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-n", "2", "-m", "not slow", "tests/test_containment.py", "tests/test_hostile.py",
         "tests/test_contained_by_construction.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=1800)
    output = result.stdout + result.stderr
    summary = output.strip().splitlines()[-1]
    figures(f"containment and hostile battery as nobody: exit {result.returncode} in "
            f"{time.perf_counter() - started:.0f} s: {summary}")
    assert result.returncode == 0, output[-4000:]
    assert "passed" in summary and "skipped" not in summary and "failed" not in summary, \
        output[-4000:]


def test_a_fuzz_run_that_compared_nothing_is_no_verdict(tmp_path):
    """docs/fuzzing.md, "Fuzzing": with an import that outlasts --minutes, no session runs a
    case; the run exits 1, says "no verdict" and why, and its report never says that every
    check agreed. (An import of 2 s against a run of 0.6: a loaded machine only makes the
    import longer.)"""
    out = tmp_path / "out"
    env = {**os.environ, "HOSTILE_SLOW_IMPORT": "1", "HOSTILE_IMPORT_SECONDS": "2"}
    result = subprocess.run(
        [sys.executable, "-m", "gradient_conformance", "fuzz",
         f"--impl={HERE / 'imports_slowly.py'}", "--minutes", "0.01", "--out", str(out),
         "--check", "test_gradients_bit_for_bit", "--pass-env=HOSTILE_SLOW_IMPORT",
         "--pass-env=HOSTILE_IMPORT_SECONDS"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "no verdict: no check ran a case in " in output, output[-3000:]
    page = (out / "report.html").read_text()
    assert "every check agreed" not in page and "no check ran a case" in page


def test_a_progress_with_no_case_or_a_failed_session_is_no_verdict(tmp_path):
    progress = fuzzing.Progress(tmp_path, "reference", "1 process")
    assert progress.unfinished().startswith("no check ran a case in ")
    progress.take((0, "record", {"check": "test_x", "outcome": "passed", "cases": 3,
                                 "ops": {}}))
    assert progress.unfinished() == ""
    progress.take((0, "done", 3))  # pytest's internal error in a session
    assert "1 fuzzing session failed or ended with an error" in progress.unfinished()
    assert progress.report().interrupted == progress.unfinished()


def test_a_database_key_gives_at_most_its_share_of_values(tmp_path):
    """A store filled with many values just under the size cut: only VALUES_PER_KEY of a
    key are read, the rest counted as left out."""
    from hypothesis.database import DirectoryBasedExampleDatabase
    inner = DirectoryBasedExampleDatabase(str(tmp_path))
    for k in range(fuzz_workers.VALUES_PER_KEY + 40):
        inner.save(b"key", k.to_bytes(4, "big") + b"\x00" * 100)
    database = fuzz_workers.bounded(inner)
    assert len(list(database.fetch(b"key"))) == fuzz_workers.VALUES_PER_KEY
    assert database.skipped == 40


@needs_bwrap
def test_replay_and_fuzz_start_the_implementation_as_they_are_told():
    """docs/isolation.md, "Isolation": every command that starts the implementation takes
    --memory-limit, --sandbox and --pass-env. tells_its_confinement.py diverges only when
    it runs under all three as given; `replay` with them diverges (exit 1), without them
    agrees (exit 0). fuzz's first load and its rechecks use the same containment."""
    from gradient_conformance.conformance.commands import fuzz as fuzz_command
    from gradient_conformance.conformance.commands import replay as replay_command
    impl = str(ROOT / "tests" / "impls" / "tells_its_confinement.py")
    case = str(ROOT / "cases" / "gradient" / "op_form_recip.ir")
    env = {**os.environ, "CONFINEMENT_MARK": "1", "CONFINEMENT_LIMIT": str(300 << 20)}
    told = ["--sandbox=bwrap", "--memory-limit=300M", "--pass-env=CONFINEMENT_MARK",
            "--pass-env=CONFINEMENT_LIMIT", f"--sandbox-bind={IMPLS}"]
    for options, status in ((told, 1), ([f"--sandbox-bind={IMPLS}"], 0)):
        result = subprocess.run([sys.executable, "-m", "gradient_conformance", "replay", case,
                                 f"--impl={impl}", *options], capture_output=True, text=True,
                                env=env, timeout=300)
        assert result.returncode == status, (options, result.stdout[-2000:], result.stderr)
    import argparse
    for command in (fuzz_command, replay_command):
        parser = argparse.ArgumentParser()
        command.add_parser(parser.add_subparsers())
        name = "fuzz" if command is fuzz_command else "replay"
        args = parser.parse_args([name, *(["case"] if name == "replay" else ["--minutes=1"]),
                                  f"--impl={impl}", *told])
        confinement = fuzz_command.confinement_of(args)
        assert (confinement.memory_limit, confinement.sandbox, confinement.pass_env) == (
            300 << 20, "bwrap", ("CONFINEMENT_MARK", "CONFINEMENT_LIMIT")), name


@pytest.mark.parametrize("target", ["zero", "fifo"])
def test_files_a_user_names_are_read_only_if_regular_and_bounded(target, tmp_path):
    """docs/isolation.md, "Isolation": --known, --xfails-file and replay's case, as a link to
    /dev/zero or as a FIFO nobody writes: a usage error naming the file, at once (before,
    INTERNALERROR> MemoryError, or a wait without end)."""
    case = str(ROOT / "cases" / "gradient" / "op_form_recip.ir")
    for name in ("known.txt", "xfails.txt", "case.ir", "tape.json"):
        path = tmp_path / name
        if target == "zero":
            path.symlink_to("/dev/zero")
        else:
            os.mkfifo(path)
    runs = [
        ["--impl=reference", f"--known={tmp_path / 'known.txt'}", "-k", "op_form_recip"],
        ["--impl=reference", f"--xfails-file={tmp_path / 'xfails.txt'}", "-k", "recip"],
        ["replay", str(tmp_path / "case.ir"), "--impl=reference"],
        ["replay", str(tmp_path / "tape.json"), "--impl=reference"],
    ]
    for arguments in runs:
        result = subprocess.run([sys.executable, "-m", "gradient_conformance", *arguments,
                                 "-p", "no:cacheprovider"] if arguments[0] != "replay" else
                                [sys.executable, "-m", "gradient_conformance", *arguments],
                                capture_output=True, text=True, timeout=120, cwd=tmp_path)
        output = result.stdout + result.stderr
        assert result.returncode == 2, (arguments, output[-2000:])
        assert "not a regular file" in output and "Traceback" not in output, output[-2000:]
    # A regular case file still replays, and one past the cap is refused, saying so.
    result = subprocess.run([sys.executable, "-m", "gradient_conformance", "replay", case,
                             "--impl=reference"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    from gradient_conformance.reference.cases import read_file
    big = tmp_path / "big.ir"
    big.write_text("#" * 2000)
    with pytest.raises(OSError, match="larger than 0 MiB"):
        read_file(big, limit=1000)
    assert read_file(big, limit=2000) == "#" * 2000


def test_vectors_replace_links_in_their_folder_rather_than_write_through(tmp_path):
    """docs/isolation.md, "Isolation": `vectors --out DIR` where DIR holds links named as
    its files (index.json, the first vector): each is replaced by the file, the files the
    links pointed at are kept."""
    from gradient_conformance.conformance.commands.vectors import export
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    out = tmp_path / "vectors"
    out.mkdir()
    first = export(tmp_path / "plain", count=3)["vectors"][0]["file"]  # what they are named
    for name in ("index.json", first):
        (out / name).symlink_to(precious)
    manifest = export(out, count=3)
    assert precious.read_text() == "keep me\n" and manifest["count"] == 3
    assert not any(p.is_symlink() for p in out.iterdir())
