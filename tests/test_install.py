"""The package as a user installs it: a wheel, in a fresh venv outside the checkout, used
from a project of their own that has packages named `reports` and `reference`. docs/commands.md,
"Installing".

Two forms (README, "The tiers"). The first tier installs the wheel alone (`--no-deps`) into a
new venv that sees the test venv's packages through a path file: what the wheel carries, its
entry points and its one top-level name, in seconds. The second installs it with its
dependencies into a fresh venv that sees nothing else, from the package index or pip's cache:
that its declared dependencies are enough. Everything else tests the checkout; only this shows
what a wheel carries.
"""

from __future__ import annotations

import json
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import pytest

from tests.conftest import CASES, ROOT

PROJECT = {
    "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = [\".\"]\n",
    "reports/__init__.py": "NAME = 'the user own reports'\n",
    "reports/html.py": "def render():\n    return 'theirs'\n",
    "reference/__init__.py": "VALUE = 42\n",
    "tests/test_mine.py": textwrap.dedent("""
        import reference
        from reports.html import render

        def test_their_own_packages():
            assert reference.VALUE == 42 and render() == 'theirs'
    """),
    # The fast implementation, and what it claims: exp2, log2 and sin through binary64 are
    # within 1 ulp, not correctly rounded (the hardest inputs to round tell).
    "myimpl.py": "from gradient_conformance.implementations.fast import CAPABILITIES, build  "
                 "# noqa\n",
    "myfault.py": ("from gradient_conformance.implementations.faults.recip_form import "
                   "build  # noqa\n"),
}


def _run(argv, cwd, timeout=900) -> tuple[int, str]:
    run = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return run.returncode, run.stdout + run.stderr


# What a checkout holds that a build neither needs nor may share.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv*", "node_modules", "build", "dist", "out",
                                    "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
                                    ".benchmarks", ".gradient-conformance")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    # Built from a copy: under -n 2 both workers may build at once, and setuptools' build/
    # folder in one shared checkout is not safe for two (CI once failed on "Directory not
    # empty: build/bdist.linux-x86_64/wheel").
    source = tmp_path_factory.mktemp("source") / "checkout"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCE)
    out = tmp_path_factory.mktemp("wheel")
    code, output = _run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                         "--no-build-isolation", "-q", "-w", str(out), str(source)], cwd=out)
    assert code == 0, output
    assert "warning" not in output.lower(), output  # no data package left unlisted
    return next(out.glob("*.whl"))


@pytest.fixture(scope="module", params=["beside", pytest.param("fresh", marks=pytest.mark.slow)])
def installed(request, wheel, tmp_path_factory):
    """(the venv's bin folder, the user's project). "beside": the wheel alone, in a venv that
    sees the test venv's packages after its own (so the wheel's modules, never the checkout's
    editable ones, are what it imports); "fresh": the wheel and its dependencies, alone."""
    home = tmp_path_factory.mktemp("user")
    venv = home / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    code, output = _run([base, "-m", "venv", str(venv)], cwd=home)
    assert code == 0, output
    python = str(venv / "bin" / "python")
    if request.param == "beside":
        site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                               "'purelib'))"], capture_output=True, text=True, check=True)
        ours = sysconfig.get_path("purelib")
        (pathlib.Path(site.stdout.strip()) / "test-venv.pth").write_text(ours + "\n")
        install = [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)]
    else:
        install = [python, "-m", "pip", "install", "-q", f"{wheel}[xdist]", "pytest-profiling"]
    code, output = _run(install, cwd=home, timeout=1800)
    assert code == 0, output
    code, output = _run([python, "-c", "import gradient_conformance; print("
                         "gradient_conformance.__file__)"], cwd=home)
    assert code == 0 and output.startswith(str(venv)), output  # the wheel's, not the checkout's
    project = home / "project"
    for name, text in PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    return venv / "bin", project


def test_the_wheel_carries_the_case_files_and_one_top_level_name(wheel, figures):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"gradient_conformance"}
    shipped = [n for n in names if n.startswith("gradient_conformance/cases/")
               and n.endswith((".ir", ".json"))]
    in_tree = [p for p in CASES.rglob("*") if p.suffix in (".ir", ".json")]
    assert len(shipped) == len(in_tree)
    for needed in ("gradient_conformance/SPEC.md", "gradient_conformance/VECTORS.md",
                   "gradient_conformance/docs/isolation.md",
                   "gradient_conformance/reports/templates/report.html.j2",
                   "gradient_conformance/cases/examples/lesson_cubic.ir"):
        assert needed in names
    figures(f"wheel: {wheel.stat().st_size / 1e3:.0f} kB, {len(shipped)} case files")


def test_a_user_s_own_pytest_still_works(installed):
    bin_, project = installed
    code, output = _run([str(bin_ / "python"), "-m", "pytest", "-q", "tests"], cwd=project)
    assert code == 0 and "1 passed" in output, output


def test_the_installed_suite_runs_against_the_user_s_module(installed):
    bin_, project = installed
    code, output = _run([str(bin_ / "gradient-conformance"), "--impl=myimpl",
                         "--collect-only", "-q"], cwd=project)
    assert code == 0, output
    installed_cases = len(re.findall(r"test_case_file\[", output))
    in_tree = len(list(CASES.rglob("*.ir")))
    assert installed_cases == in_tree
    code, output = _run([str(bin_ / "gradient-conformance"), "--impl=myimpl", "-q",
                         "--max-examples=20"], cwd=project)
    assert code == 0, output[-3000:]


def test_a_seeded_fault_fails_with_the_replay_command(installed):
    bin_, project = installed
    code, output = _run([str(bin_ / "gradient-conformance"), "--impl=myfault", "-q",
                         "-k", "op_form_recip"], cwd=project)
    assert code == 1, output[-3000:]
    command = re.search(r"^replay:\s+(.+)$", output, re.M).group(1)
    assert command.startswith(f"{bin_ / 'gradient-conformance'} replay "
                              ".gradient-conformance/divergences/"), command
    code, again = _run(shlex.split(command), cwd=project)
    assert code == 1 and "DIVERGES" in again, again


def test_the_installed_spec_can_be_read(installed):
    bin_, project = installed
    code, output = _run([str(bin_ / "gradient-conformance"), "spec", "Isolation"], cwd=project)
    assert code == 0 and output.startswith("(docs/isolation.md)\n## Isolation") and \
        "Deadlines" in output, output
    code, output = _run([str(bin_ / "gradient-conformance"), "spec", "Hash consing"],
                        cwd=project)
    assert code == 0 and output.startswith("(SPEC.md)\n## Hash consing"), output


@pytest.mark.slow
@pytest.mark.parametrize("installed", ["fresh"], indirect=True)  # two whole runs: once
def test_xdist_gives_the_same_divergences_as_one_process(installed, figures):
    """The same divergences, signature for signature, in one process and in two workers (the
    second tier: two whole runs; the first tier's test_plugin.py runs xdist's reporting)."""
    bin_, project = installed
    signatures = {}
    for jobs in ("0", "2"):
        report = project / f"report-{jobs}.json"
        code, output = _run([str(bin_ / "gradient-conformance"), "--impl=myfault", "-q",
                             "-n", jobs, "--max-examples=50", f"--report-json={report}"],
                            cwd=project)
        assert code == 1, output[-3000:]
        signatures[jobs] = sorted(tuple(d["signature"]) for d in
                                  json.loads(report.read_text())["divergences"])
    assert signatures["0"] == signatures["2"] and signatures["0"], signatures
    figures(f"installed: -n 0 and -n 2 both report the same {len(signatures['0'])} "
            "divergences, signature for signature")


def test_pytest_profiling_and_the_plugin_load_together(installed):
    bin_, project = installed
    code, output = _run([str(bin_ / "python"), "-m", "pytest", "-q", "--profile", "tests"],
                        cwd=project)
    assert code == 0 and "1 passed" in output, output
