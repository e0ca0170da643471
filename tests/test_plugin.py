"""The suite as a pytest plugin (docs/suite.md, "The conformance suite"): inert until asked for,
options that clash with no other plugin, stable ids, skips and xfails by part of an id, usage
errors for what cannot be checked, xdist, and what the terminal shows of a failure."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import FAST, FAULTS, ROOT, suite

RECIP = f"{FAULTS}.recip_form"


def _pytest(*args, cwd=ROOT, env=None):
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                         cwd=cwd, capture_output=True, text=True, timeout=900, env=env)
    return run.returncode, run.stdout + run.stderr


def test_loading_the_plugin_imports_nothing_heavy():
    probe = ("import sys\nbefore = set(sys.modules)\nimport gradient_conformance.conformance."
             "plugin\nprint(sorted(m for m in set(sys.modules) - before "
             "if m.split('.')[0] in ('numpy', 'hypothesis', 'jinja2', 'mpmath', 'gmpy2') "
             "or m.startswith('gradient_conformance.reference')))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd="/", check=True)
    assert run.stdout.strip() == "[]"


def test_a_user_s_own_tests_run_as_ever_with_the_plugin_installed(tmp_path):
    (tmp_path / "test_mine.py").write_text("def test_mine():\n    assert 1 + 1 == 2\n")
    code, output = _pytest("-q", cwd=tmp_path)
    assert code == 0 and "1 passed" in output, output
    help_text = _pytest("--help", cwd=tmp_path)[1]
    assert "--impl=IMPL" in help_text and "--conformance-profile" in help_text


def test_the_options_do_not_clash_with_pytest_profiling(tmp_path):
    """pytest-profiling owns --profile; with it installed, both plugins load and work."""
    pytest.importorskip("pytest_profiling")
    (tmp_path / "test_mine.py").write_text("def test_mine():\n    pass\n")
    code, output = _pytest("-q", "--profile", cwd=tmp_path)
    assert code == 0 and "1 passed" in output and "Profiling" in output, output
    code, output = _pytest("conformance", "--impl=reference", "--conformance-max-examples=2",
                           "-q", "-k", "lesson_cubic")
    assert code == 0 and "1 passed" in output, output


@pytest.mark.parametrize("form", ["checkout", "pyargs"])
def test_the_suite_without_an_implementation_is_a_usage_error(form):
    target = ["conformance"] if form == "checkout" else [
        "--pyargs", "gradient_conformance.conformance.checks"]
    code, output = _pytest(*target, "-q")
    assert code == 4 and "needs an implementation: name the implementation" in output, output
    assert "passed" not in output and "skipped" not in output


@pytest.mark.parametrize(("option", "said"), [
    ("--max-examples=0", "would check nothing"), ("--max-examples=-5", "would check nothing"),
    ("--max-examples=many", "not a whole number"), ("--case-timeout=0", "more than 0"),
    ("--profile=fast", "'fast' is not one of ci, dev, nightly"),
])
def test_bad_option_values_are_usage_errors(option, said, capsys, monkeypatch):
    """In this process (the command's own check of its options, before pytest starts: so
    pytest.main is never reached); test_cli.py runs the command as a user does."""
    from gradient_conformance.conformance.commands import main

    def reached(*args, **kw):
        raise AssertionError(f"pytest ran for a bad option: {args}")
    monkeypatch.setattr(pytest, "main", reached)
    code = main(["--impl=reference", option, "-q", "-k", "lesson_cubic"])
    output = capsys.readouterr().err
    assert code == 2 and said in output and output.startswith("gradient-conformance: "), output


def test_several_implementations_are_a_usage_error():
    code, output = _pytest("conformance", "--impl=reference", f"--impl={FAST}", "-q")
    assert code == 4 and "one implementation per run" in output, output


def test_ids_name_the_check_not_the_implementation():
    code, output, _ = suite(str(ROOT / "tests" / "hostile" / "missing_slot.py"),
                            "--collect-only", "-q")
    assert code == 0, output
    ids = [line for line in output.splitlines() if "::" in line]
    assert ids and not any("missing_slot" in line or "hostile" in line for line in ids)
    assert any(line.endswith("test_exact_programs_bit_for_bit") for line in ids)
    assert any(line.endswith("test_case_file[gradient/op_form_recip.ir]") for line in ids)
    code, output, _ = suite(RECIP, "--collect-only", "-q", "-k", "recip")
    selected = [line for line in output.splitlines() if "::" in line]
    assert selected and all("recip" in line for line in selected), selected


def test_skips_and_xfails_match_part_of_a_stable_id(tmp_path):
    skips = tmp_path / "skips.txt"
    skips.write_text("test_exact_programs_bit_for_bit\nno_such_check  # a stale entry\n")
    xfails = tmp_path / "xfails.txt"
    xfails.write_text("gradient/op_form_recip.ir\n")
    code, output, _ = suite(RECIP, "--max-examples=5", f"--skips-file={skips}",
                            f"--xfails-file={xfails}", "-q", "-rsx", "-k",
                            "exact_programs or op_form")
    assert code == 0, output[-3000:]
    assert "listed in the skips file: test_exact_programs_bit_for_bit" in output
    assert "listed in the xfails file: gradient/op_form_recip.ir" in output
    assert "'no_such_check'" in output and "stale" in output


def test_unsupported_features_are_never_generated_and_are_skipped_with_the_reason(tmp_path):
    module = tmp_path / "partial.py"
    module.write_text(textwrap.dedent(f"""
        from {FAST.rsplit('.', 1)[0]} import fast

        NAME = "partial"
        CAPABILITIES = {{"unsupported": ["range", "call", "bitcast", "higher_order"],
                        "ulp": fast.CAPABILITIES["ulp"], "bit_exact_gradients": True}}

        def build(source):
            code = " ".join(line.split("#")[0] for line in source.splitlines())
            for word in ("range", "call", "bitcast"):  # it truly cannot do these
                if f" {{word}} " in f" {{code}} ":
                    raise NotImplementedError(word)
            return fast.build(source)
    """))
    code, output, _ = suite(str(module), "--max-examples=30", "-rs")
    assert code == 0, output[-3000:]
    assert "unsupported" in output and "skipped" in output.splitlines()[-1]
    assert "implementation: partial" in output  # the name stands in the header


def test_a_module_in_the_current_directory_is_found(tmp_path):
    (tmp_path / "myimpl.py").write_text(f"from {FAST} import build  # noqa: F401\n")
    code, output, _ = suite("myimpl", "-q", "-k", "lesson_cubic", cwd=tmp_path)
    assert code == 0 and "1 passed" in output, output
    code, output, _ = suite("nosuchimpl", "-q", cwd=tmp_path)
    assert code == 2 and "no module named 'nosuchimpl'" in output, output


def test_a_failure_in_the_terminal_says_how_to_replay_it(tmp_path):
    code, output, _ = suite(RECIP, "-q", "-k", "op_form_recip", cwd=tmp_path)
    assert code == 1, output
    assert "--- the program" in output and "%y = recip %x" in output
    assert "0.375 (0x3ec00000)" in output  # an input in decimal and hex
    assert "expected -7.1111116 (0xc0e38e3a), got -7.111111 (0xc0e38e39)" in output
    case = re.search(r"^case file: (\S+)$", output, re.M).group(1)
    assert case.startswith(".gradient-conformance/divergences/")
    assert (tmp_path / ".gradient-conformance" / ".gitignore").read_text() == "*\n"
    command = re.search(r"^replay:\s+(.+)$", output, re.M).group(1)
    assert command.endswith(f"gradient-conformance replay {case} --impl={RECIP}"), command
    again = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 1 and "DIVERGES" in again.stdout, again.stdout + again.stderr


def test_the_replay_command_is_the_one_on_the_path_when_it_is_this_installation_s(tmp_path):
    """A report sent to someone else shows `gradient-conformance replay ...`, no path of this
    machine's, when the command on the PATH is the one that ran (an activated venv)."""
    scripts = pathlib.Path(sys.executable).parent
    if not (scripts / "gradient-conformance").exists():
        pytest.fail(f"no gradient-conformance beside {sys.executable}: not an installation")
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"}
    code, output, _ = suite(RECIP, "-q", "-k", "op_form_recip", cwd=tmp_path, env=env)
    assert code == 1, output
    command = re.search(r"^replay:\s+(.+)$", output, re.M).group(1)
    assert command.startswith("gradient-conformance replay .gradient-conformance/"), command


def test_a_passing_run_s_figures_say_what_was_measured_against_what():
    code, output, _ = suite(FAST, "-q", "--max-examples=20", "-k", "near_the_true")
    assert code == 0, output
    line = next(x for x in output.splitlines() if x.startswith("gradients against the true"))
    assert "the bound is K = 4 times the reference's own f32 error" in line
    assert "every one of" in line and "outputs within it" in line


@pytest.mark.parametrize("jobs", ["0", "2"])
def test_xdist_reports_every_worker_s_divergences(tmp_path, jobs, figures):
    pytest.importorskip("xdist")
    report = tmp_path / "r.json"
    # Without shrinking: which process found a divergence, not its size, is the subject.
    code, output, seconds = suite(RECIP, "-n", jobs, "-q", f"--report-json={report}",
                                  "--max-examples=200", "--no-shrink", "-k",
                                  "(recip or gradients_bit) and not rule_at_every")
    assert code == 1, output[-3000:]
    data = json.loads(report.read_text())
    assert {d["check"] for d in data["divergences"]} == {"test_case_file",
                                                        "test_gradients_bit_for_bit"}
    # op_form_recip.ir and weighted_recip.ir, the two case files of recip's rule
    assert sorted(d["test_id"] for d in data["divergences"] if d["check"] == "test_case_file") \
        == ["test_cases.py::test_case_file[gradient/op_form_recip.ir]",
            "test_cases.py::test_case_file[gradient/weighted_recip.ir]"]
    assert data["checks"]["test_case_file"]["failed"] == 2
    assert data["ops"]["recip"]["test_gradients_bit_for_bit"][0] > 0
    assert "gradients against the true derivative" not in output or "outputs" in output
    figures(f"xdist: -n {jobs} reports {len(data['divergences'])} divergences in "
            f"{seconds:.1f} s")


def test_the_matrix_runs_from_where_the_user_is(tmp_path):
    """Module names and paths mean what they mean in the user's directory, the tables land
    there, and a system that could not run makes the exit status 1."""
    (tmp_path / "mine.py").write_text(f"from {FAST} import build  # noqa: F401\n")
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "matrix", "--impl",
                          "mine", "--impl", "nosuchmodule", "--report", "out/m.html",
                          "-k", "exact_programs"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 1, run.stderr[-3000:]
    table = (tmp_path / "out" / "m.md").read_text()
    assert "| mine " in table and "did not run" not in table.split("nosuchmodule")[0]
    assert (tmp_path / "out" / "m.runs" / "mine.json").exists()
    assert "nosuchmodule" in run.stdout and "did not run" in run.stdout


def test_a_user_s_own_hypothesis_tests_keep_their_settings(tmp_path):
    """The suite's settings go to its checks alone: a user's Hypothesis tests in the same
    session see the settings they see without the suite (Hypothesis's defaults, or its own
    ci profile where CI is set), while the suite's checks run the examples it was told to."""
    (tmp_path / "test_mine.py").write_text(textwrap.dedent("""
        import json, os
        from hypothesis import given, settings, strategies as st

        def test_the_default_settings():
            d = settings.default
            with open(os.environ["SEEN"], "w") as out:
                json.dump([d.max_examples, sorted(map(str, d.suppress_health_check)),
                           d.derandomize, str(d.deadline), [str(p) for p in d.phases]], out)

        seen = []

        @given(st.integers())
        def test_drawn(x):
            seen.append(x)

        def test_drawn_as_many_as_the_default():
            assert len(seen) == settings.default.max_examples
    """))
    alone, beside = tmp_path / "alone.json", tmp_path / "beside.json"
    code, output = _pytest(str(tmp_path / "test_mine.py"), "-q", cwd=tmp_path,
                           env={**os.environ, "SEEN": str(alone)})
    assert code == 0 and "3 passed" in output, output[-3000:]
    report = tmp_path / "run.json"
    code, output = _pytest(str(tmp_path / "test_mine.py"), "--pyargs",
                           "gradient_conformance.conformance.checks", f"--impl={FAST}",
                           "--conformance-max-examples=7", f"--conformance-report-json={report}",
                           "-q", "-k", "test_drawn or test_the_default or "
                           "test_exact_programs_bit_for_bit", cwd=tmp_path,
                           env={**os.environ, "SEEN": str(beside)})
    assert code == 0 and "4 passed" in output, output[-3000:]
    assert json.loads(beside.read_text()) == json.loads(alone.read_text())
    assert json.loads(alone.read_text())[0] != 7
    checks = json.loads(report.read_text())["checks"]
    assert set(checks) == {"test_exact_programs_bit_for_bit"}, checks


def test_xfails_and_skips_match_parts_of_an_id_not_substrings(tmp_path):
    from gradient_conformance.conformance.collection import Entry

    class Item:
        path = "/x/test_cases.py"
        name = "test_case_file[gradient/op_form_recip.ir]"

    for text, matches in [("gradient/op_form_recip.ir", True), ("op_form_recip", False),
                          ("test_case_file", True), ("test_case", False),
                          ("test_cases.py", True), ("test_cases.py::test_case_file", True),
                          ("test_forward.py::test_case_file", False),
                          ("test_case_file[gradient/op_form_recip.ir]", True),
                          ("test_case_file[examples/max_tie.ir]", False)]:
        assert Entry.parse(text).matches(Item()) is matches, text
    assert Entry.parse("test_x[") is None
    bad = tmp_path / "xfails.txt"
    bad.write_text("# known\ntest_cases.py::test_case_file[\n")
    code, output, _ = suite(RECIP, f"--xfails-file={bad}", "--collect-only", "-q")
    assert code in (2, 4) and "line 2" in output and "test_case_file[" in output, output[-2000:]


def test_a_user_s_test_given_an_impl_of_its_own_is_not_a_check(tmp_path):
    """A parameter or a module's own fixture named impl makes a user's test, which runs as
    ever beside the plugin: no usage error for a suite nobody asked for."""
    (tmp_path / "test_mine.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.fixture
        def impl():
            return "mine"

        def test_fixture(impl):
            assert impl == "mine"
    """))
    (tmp_path / "test_param.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('impl', ['a', 'b'])\n"
        "def test_param(impl):\n    assert impl in 'ab'\n")
    code, output = _pytest("-q", cwd=tmp_path)
    assert code == 0 and "3 passed" in output, output


def test_each_divergence_is_on_the_terminal_when_its_check_ends(tmp_path):
    """Summary, diagnosis, location and replay command as soon as the check ends; the full
    text at the end, as pytest's failures."""
    code, output, _ = suite(RECIP, "-q", "-k", "op_form_recip or near_the_true_derivative",
                            cwd=tmp_path)
    assert code == 1, output
    # On a line of its own, after -q's progress characters as after a test file's name.
    found = output.index("\ndivergence found by test_case_file[gradient/op_form_recip.ir]:") + 1
    block = output[found:].split("\n", 6)
    assert block[1].startswith("  slot 1[0]: expected -7.1111116")
    assert block[2].startswith("  diagnosis: ") and block[3].startswith("  location: line 8")
    assert block[4].startswith("  replay:    ") and "gradient-conformance replay" in block[4]
    assert found < output.index("= FAILURES =")


def test_the_first_divergence_is_on_the_screen_before_the_run_ends(tmp_path):
    """In a terminal (tmux), as a student watches it: the case file's divergence shows while
    the derivative check, which runs after it, is still running."""
    import shutil
    import time
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (make test installs it as root): this test "
                    "watches a terminal")
    session = f"gc-first-{os.getpid()}"
    command = (f"cd {tmp_path} && {sys.executable} -m gradient_conformance --impl={RECIP} -q "
               "-p no:cacheprovider -k 'op_form_recip or near_the_true_derivative'; "
               "echo RUN-ENDED; sleep 60")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50",
                    command], check=True)
    try:
        deadline, screen = time.monotonic() + 300, ""
        while time.monotonic() < deadline:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                    capture_output=True, text=True).stdout
            if "divergence found by" in screen or "RUN-ENDED" in screen:
                break
            time.sleep(0.1)
        assert "divergence found by test_case_file[gradient/op_form_recip.ir]" in screen, screen
        assert "RUN-ENDED" not in screen and " failed" not in screen, screen
        assert "diagnosis: " in screen and "replay: " in screen, screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_an_xfails_file_is_indexed_and_matches_as_each_entry_does():
    """docs/suite.md, "The conformance suite": the indexed lookup (collection.Entries) finds
    for every test exactly the entries that match it one by one, for every shape of entry:
    a module, a check, one instance, a parameter alone."""
    import itertools
    import types

    from gradient_conformance.conformance.collection import Entries, Entry
    modules, checks, params = ("test_a.py", "test_b.py"), ("test_x", "test_y"), ("p", "q")
    texts = {m for m in modules} | {f"{m}::{c}" for m in modules for c in checks} | \
        set(checks) | {f"{c}[{p}]" for c in checks for p in params} | set(params) | \
        {f"{m}::{c}[{p}]" for m in modules for c in checks for p in params}
    entries = [Entry.parse(t) for t in sorted(texts)] * 2  # repeated lines too
    index = Entries(entries)
    for m, c, p in itertools.product(modules, checks, (*params, None)):
        item = types.SimpleNamespace(path=f"/x/{m}", name=c + (f"[{p}]" if p else ""))
        assert sorted(e.text for e in index.matching(item)) == \
            sorted(e.text for e in entries if e.matches(item)), (m, c, p)
