"""`python -m reference`: run, expand, check; bad input is a message with the line, never a
traceback."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import CASES, ROOT


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reference", *args], cwd=ROOT, text=True,
                          capture_output=True, input=stdin, timeout=120)


def test_run_prints_final_slots_from_the_files_inputs():
    result = _cli("run", str(CASES / "gradient" / "op_form_recip.ir"), "--bits")
    assert result.returncode == 0, result.stderr
    assert "out 1 = -7.1111116 (0xc0e38e3a)" in result.stdout


def test_run_takes_inputs_on_the_command_line():
    result = _cli("run", str(CASES / "gradient" / "intermediate_x.ir"), "--in", "0=2")
    assert result.returncode == 0, result.stderr
    assert "out 1 = 8.0" in result.stdout  # dy/du = 2u with u = x*x = 4


def test_expand_and_trace():
    result = _cli("expand", str(CASES / "gradient" / "arrival_not_reversed.ir"), "--trace")
    assert result.returncode == 0, result.stderr
    assert "%g = add" in result.stdout and "# the walk" in result.stdout
    assert "received [" in result.stdout


def test_check_reports_pass_and_fail(tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text("#: out 0 = 1.0\n%o = buffer slot=0 dtype=f32 shape=[]\nstore %o 2.0\n")
    result = _cli("check", str(CASES / "ops" / "shapes.ir"), str(bad))
    assert result.returncode == 1
    assert "PASS" in result.stdout and "FAIL" in result.stdout
    assert result.stdout.strip().endswith("1 passed, 1 failed")


def test_bad_program_is_a_message_not_a_traceback(tmp_path):
    path = tmp_path / "bad.ir"
    path.write_text("%a = buffer slot=0 dtype=f32 shape=[]\n%x = load %a\n%y = frob %x\n")
    result = _cli("run", str(path))
    assert result.returncode == 1
    assert f"{path}:3:" in result.stderr and "unknown op 'frob'" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_time_error_is_a_message(tmp_path):
    result = _cli("run", str(CASES / "run" / "index_out_of_range.ir"))
    assert result.returncode == 1
    assert "out of range" in result.stderr and "Traceback" not in result.stderr


def test_missing_file_is_a_message():
    result = _cli("run", "no/such/file.ir")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_a_malformed_case_file_is_one_fail_line(tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text("#: in 5 = 1.0\n%o = buffer slot=0 dtype=f32 shape=[]\n")
    broken = tmp_path / "broken.ir"
    broken.write_text("#: out 0 = 1.0\n%o = buffer slot=0 dtype=f32 shape=[\n")
    result = _cli("check", str(bad), str(broken), str(CASES / "ops" / "shapes.ir"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "does not declare" in result.stdout
    assert result.stdout.strip().endswith("1 passed, 2 failed")


def _command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradient_conformance", *args],
                          capture_output=True, text=True, timeout=300)


def test_help_describes_each_option_with_its_choices():
    from gradient_conformance.conformance.commands.suite import SUITE_OPTIONS
    run = _command("--help")
    assert run.returncode == 0
    for name in SUITE_OPTIONS:
        assert f"\n  {name}" in run.stdout, name
    assert "  --profile {ci,dev,nightly}\n      ci (derandomized" in run.stdout
    assert "  --sandbox {auto,bwrap,none}\n" in run.stdout


def test_a_usage_error_is_the_suite_s_own_names_the_option_as_typed_and_exits_2():
    for typed, says in ((["--profile=quick"], "--profile=quick: 'quick' is not one of ci, "
                         "dev, nightly"),
                        (["--profile", "quick"], "--profile quick: 'quick' is not one of"),
                        (["--max-examples", "-3"], "--max-examples -3: -3 examples would "
                         "check nothing"),
                        (["--sandbox"], "--sandbox needs a value: --sandbox {auto,bwrap,none}")):
        run = _command("--impl=reference", *typed)
        assert run.returncode == 2, (typed, run.stderr)
        assert f"gradient-conformance: {says}" in run.stderr, run.stderr
        assert "--conformance-" not in run.stderr and "Traceback" not in run.stderr
    run = _command("--impl=reference", "--no-such-option")
    assert run.returncode == 2 and "--no-such-option" in run.stderr, run.stderr


def test_running_on_processes_without_xdist_says_which_extra_to_install(monkeypatch):
    import importlib.util

    from gradient_conformance.conformance.commands import suite
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xdist" else real(name, *a))
    for argv in (["-n", "2"], ["-n2"], ["--numprocesses=2"]):
        said = suite.usage_problem(["--impl=x", *argv])
        assert said is not None and said.startswith(" ".join(argv)), said
        assert "pip install 'gradient-conformance[xdist]'" in said
    assert suite.usage_problem(["--impl=x", "-x", "-k", "recip"]) is None


def test_the_checks_command_lists_every_check_with_what_it_checks():
    """`gradient-conformance checks`: a line each, to pick from with -k, read from the checks'
    source without importing them, nor Hypothesis or pytest."""
    import ast
    run = _command("checks")
    assert run.returncode == 0, run.stderr
    names = [node.name for path in (ROOT / "conformance" / "checks").glob("test_*.py")
             for node in ast.parse(path.read_text()).body
             if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    lines = {line.split()[0]: line for line in run.stdout.splitlines() if line.strip()}
    for name in names:
        assert name in lines and lines[name].rstrip().endswith("."), lines.get(name)
    assert f"{len(names)} checks; run some with -k" in run.stdout
    probe = subprocess.run([sys.executable, "-c", (
        "import sys, contextlib, io\n"
        "from gradient_conformance.conformance.commands import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['checks'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hypothesis', 'pytest')\n"
        "             or m.startswith('gradient_conformance.conformance.checks.')))")],
        capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`gradient-conformance --help | head -1`: before, a BrokenPipeError's traceback. The
    pipe's reading end is closed before the command starts, so that its first write fails
    whatever the machine's speed."""
    import os
    read, write = os.pipe()
    os.close(read)
    try:
        command = subprocess.run([sys.executable, "-m", "gradient_conformance", "--help"],
                                 stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert command.returncode == 141 and command.stderr == "", command.stderr


def test_workers_are_chosen_for_the_machine_or_the_count_is_questioned():
    """docs/suite.md, "The conformance suite": `-n auto` becomes a count that fits the
    cores (two busy processes per worker, one with --in-process), or no workers; a count
    that cannot fit is run as asked, with a note saying why it will not help."""
    from gradient_conformance.conformance.commands.suite import parallelism
    argv, note = parallelism(["--impl=x", "-n", "auto", "-x"], 2)
    assert argv == ["--impl=x", "-x"]
    assert note.startswith("-n auto: this machine has 2 cores") and "no workers" in note
    argv, note = parallelism(["--impl=x", "--numprocesses=auto"], 8)
    assert argv == ["--impl=x", "-n", "4"] and "4 workers for this machine's 8 cores" in note
    argv, note = parallelism(["--impl=x", "-nauto", "--in-process"], 8)
    assert argv == ["--impl=x", "-n", "8", "--in-process"], argv
    argv, note = parallelism(["--impl=x", "-n", "2"], 2)
    assert argv == ["--impl=x", "-n", "2"]
    assert note == ("-n 2: each worker runs the checks and the implementation's own process, "
                    "so 4 busy processes share this machine's 2 cores; one process without "
                    "-n fits them")
    assert parallelism(["--impl=x", "-n", "2"], 4) == (["--impl=x", "-n", "2"], None)
    assert parallelism(["--impl=x", "-n3"], 4)[1].endswith("-n 2 fits them")
    assert parallelism(["--impl=x", "-k", "recip"], 1) == (["--impl=x", "-k", "recip"], None)


def test_workers_auto_is_said_on_the_command_line():
    """The note reaches the user, on stderr, before the run (this machine's cores)."""
    from gradient_conformance.conformance.commands.suite import parallelism, usable_cores
    run = _command("--impl=gradient_conformance.implementations.fast", "-n", "auto", "-k",
                   "case_file and relu", "-q")
    expected = parallelism(["-n", "auto"], usable_cores())[1]
    assert f"gradient-conformance: {expected}" in run.stderr, run.stderr
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr


def test_a_mistyped_option_is_the_command_s_usage_error_with_what_was_meant():
    """Before, `--imp=`, `--profle=` and `--knwon=` reached pytest.main(), whose usage error
    named none of the suite's options. Now the command says which one was meant, exit 2; an
    option pytest or a plugin has (`--profile-svg`, pytest-profiling's) is left to pytest."""
    for typed, meant in (("--imp=x", "--impl"), ("--profle=ci", "--profile"),
                         ("--knwon=k.txt", "--known")):
        run = subprocess.run([sys.executable, "-m", "gradient_conformance", "--impl=x", typed],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 2, run.stderr
        assert f"{typed.split('=')[0]}: no such option; did you mean {meant}?" in run.stderr
        assert "pytest.main()" not in run.stderr
    from gradient_conformance.conformance.commands.suite import usage_problem
    assert usage_problem(["--impl=x", "--profile-svg"]) is None
