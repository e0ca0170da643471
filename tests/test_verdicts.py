"""Verdicts true to what an implementation claims, and words true to what was compared (issue
20): the bit-exact claim honoured by every check whose bits are its subject, figures that
count cases and not shrinking's re-runs, replay that never reads green with nothing to
compare, and numbers shown as numbers. docs/suite.md, "The conformance suite";
docs/commands.md, "Replay"."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

from gradient_conformance.conformance.casefiles import case_file_buffers
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.outcome import compare
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.reference import cases
from tests.conftest import CASES, FAULTS, ROOT, suite

# The variants that compute the same real derivative, rounded otherwise: another order of a
# sum, or another op form of a rule. A case file one of them fails holds only bit for bit.
ROUNDING = ("program-order", "reversed-arrival", "reversed-program-order", "creation-order",
            "operands-right-to-left", "pairwise", "recip-neg-div", "recip-form",
            "recip-neg-first", "sqrt-div", "sqrt-half-div", "exp2-product", "log2-div",
            "sin-cos", "sin-reflected", "blocked-past-eight", "expand-axis-by-axis")


def _tagged() -> set[str]:
    lines = (CASES / "bit_exact_gradients.txt").read_text().splitlines()
    return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()}


def test_the_bit_exact_case_files_are_those_a_rounding_variant_fails():
    assert set(ROUNDING) <= set(CATALOGUE)
    failed = set()
    for path in cases.case_paths([CASES]):
        case = cases.load_case(path)
        if case.error is not None or case.run_error:
            continue
        reading = Reading(case.source)
        buffers = case_file_buffers(case, reading.slots)
        want = reading.outcome(buffers)
        if any(compare(want, reading.outcome(buffers, CATALOGUE[v].semantics())) is not None
               for v in ROUNDING):
            failed.add(path.relative_to(CASES).as_posix())
    assert failed == _tagged()


def _without_the_claim(tmp_path: pathlib.Path, variant: str) -> pathlib.Path:
    """A module that makes a rounding variant's fault and does not claim bit-exact
    gradients."""
    module = tmp_path / "rounds_otherwise.py"
    module.write_text(
        "from gradient_conformance.conformance.diagnosis.variants import implementation\n"
        f"build = implementation({variant!r}).build\n"
        "CAPABILITIES = {'unsupported': [], 'ulp': {}, 'bit_exact_gradients': False}\n")
    return module


def test_without_the_claim_the_bits_of_rule_forms_and_orders_are_not_demanded(tmp_path):
    """Before, the accumulation check and the op-form and order case files demanded the
    bits of an implementation that never claimed them. The files' gradient slots are left
    out, saying why (another order can be far from the truth there: a bound on the truth
    would fail a legitimate order), their other slots compared; the accumulation check,
    whose subject is the bits of an order, is skipped, saying why."""
    for variant, selected in (("recip-form", "op_form_recip"),
                              ("reversed-arrival", "arrival_not_reversed or accumulation or "
                                                   "shares_are_summed")):
        code, output, _ = suite(str(_without_the_claim(tmp_path, variant)), "-k", selected,
                                "-rs", "--max-examples=20")
        assert code == 0, output[-3000:]
        assert "whose point is those bits" in output, output[-3000:]
    assert "does not claim bit-exact gradients" in output, output[-3000:]  # accumulation


def _in_process(spec: str, bit_exact: bool):
    """An implementation called in this process, its bit-exact claim set to `bit_exact`."""
    from gradient_conformance.conformance.transports.loading import load
    impl = load(spec, in_process=True)
    impl.capabilities = {**impl.capabilities, "bit_exact_gradients": bit_exact}
    return impl


def _check_verdict(impl, path) -> bool | None:
    """The case-file check's verdict: True passed, False diverged, None skipped."""
    import pytest

    from gradient_conformance.conformance.casefiles import check_case_file
    from gradient_conformance.conformance.findings import Diverged
    from gradient_conformance.conformance.tallies import Tally
    try:
        check_case_file(impl, Tally(), path, path.name)
    except Diverged:
        return False
    except pytest.skip.Exception:
        return None
    return True


CAST_PASSES = str(ROOT / "tests" / "impls" / "cast_passes.py")


def test_the_case_file_check_and_replay_give_one_verdict(tmp_path):
    """Every case file, through the check and through `replay`, under either claim, for the
    spec, a legitimate other order of sums (reversed-arrival, which without the claim must
    fail nothing), and a gradient through a cast: the same verdict (a skip is replay's NOT
    COMPARED). Without the claim, the cast files fail on their gradient slots, compared with
    the true derivative; with it, on their bits."""
    from gradient_conformance.conformance.commands.replay import replay
    specs = {"spec": "reference", "cast": CAST_PASSES,
             "order": str(_variant_module("reversed-arrival", tmp_path))}
    from gradient_conformance import resource
    paths = [p for p in cases.case_paths([resource("cases")]) if p.suffix == ".ir"]
    for name, spec in specs.items():
        for bit_exact in (True, False):
            impl = _in_process(spec, bit_exact)
            try:
                failed = set()
                for path in paths:
                    check = _check_verdict(impl, path)
                    again, text = replay(impl, str(path))
                    assert check == again, (name, bit_exact, path, check, again, text)
                    if check is False:
                        failed.add(path.name)
            finally:
                impl.close()
            if name == "spec" or (name == "order" and not bit_exact):
                assert not failed, (name, bit_exact, failed)
            if name == "cast":
                assert {"lesson_cast_dead_end.ir", "weighted_cast.ir"} <= failed, failed


def _variant_module(variant: str, folder: pathlib.Path) -> pathlib.Path:
    module = folder / "rounds_otherwise.py"
    module.write_text(
        "from gradient_conformance.conformance.diagnosis.variants import implementation\n"
        f"build = implementation({variant!r}).build\n")
    return module


def test_a_gradient_through_a_cast_fails_the_case_files_written_for_it():
    """Before, without the bit-exact claim, the gradient slots of every case file were left
    out, and a gradient through a cast to i32 and back (2.0 where the truth is 1.0) passed
    the files written to test that rule; `replay` said DIVERGES of the same file."""
    code, output, _ = suite(CAST_PASSES, "-k", "lesson_cast_dead_end or weighted_cast",
                            "--no-shrink")
    assert code == 1, output[-3000:]
    failed = set(re.findall(r"^FAILED \S*::(test_case_file\[\S+\])", output, re.M))
    assert failed == {"test_case_file[examples/lesson_cast_dead_end.ir]",
                      "test_case_file[gradient/weighted_cast.ir]"}, output[-3000:]
    assert "the true value is" in output and "against the true derivative" in output


# A wrong rule on nearly every gradient's path, so that the derivative check meets it within
# its first cases, whatever the generators draw: mul's share doubled. (A rule of a rarer op, a
# where, was met between 60 and 100 derandomized cases one day, and past 120 the next.)
WRONG_MUL = (
    "import dataclasses\n"
    "from gradient_conformance import reference\n"
    "from gradient_conformance.reference.semantics import SPEC\n"
    "def _mul(e, u, g, k):\n"
    "    return e('mul', e('mul', g, u.operands[1 - k]), e.f32('2.0'))\n"
    "SEMANTICS = dataclasses.replace(SPEC, rules={**SPEC.rules, 'mul': _mul})\n"
    "NAME, VERSION, CAPABILITIES = 'mul share doubled', '0', None\n"
    "def build(source):\n"
    "    return reference.build(source, SEMANTICS)\n")
EXAMPLES = 100


def _wrong_mul(tmp_path: pathlib.Path) -> str:
    module = tmp_path / "wrong_mul.py"
    module.write_text(WRONG_MUL)
    return str(module)


def test_the_derivative_figures_count_cases_not_shrinking_re_runs(tmp_path):
    report = tmp_path / "r.json"
    code, output, _ = suite(_wrong_mul(tmp_path), "-k", "near_the_true_derivative",
                            f"--max-examples={EXAMPLES}", f"--report-json={report}",
                            shrink=True)  # what it counts apart are shrinking's re-runs
    assert code == 1, output[-3000:]
    figures = json.loads(report.read_text())
    cases_line = next(line for line in output.splitlines()
                      if line.startswith("gradients against the true derivative:"))
    counted = int(cases_line.split(":")[1].split()[0])
    assert counted <= EXAMPLES, cases_line
    assert "re-runs while shrinking" in cases_line, cases_line
    # The cases that used mul: among those counted, and none of the re-runs.
    used, _ = figures["ops"]["mul"]["test_gradients_are_near_the_true_derivative"]
    assert 0 < used <= counted, (used, counted)


def test_messages_show_numbers_as_numbers(tmp_path):
    code, output, _ = suite(_wrong_mul(tmp_path), "-k", "near_the_true_derivative",
                            f"--max-examples={EXAMPLES}")
    assert code == 1 and "the true value is" in output, output[-3000:]
    assert "np.float" not in output and "np.int" not in output, output[-3000:]


def _replay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradient_conformance", "replay", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_replay_without_expectations_compares_with_the_reference(tmp_path):
    """Once, a case file without `#: out` lines replayed as AGREES; then as "nothing to
    compare". A program with no expectation is compared with the reference's own outcome:
    its values, its rejection, its run-time error, said first."""
    bare = tmp_path / "bare.ir"
    bare.write_text("\n".join(line for line in (CASES / "gradient" / "op_form_recip.ir")
                              .read_text().splitlines() if not line.startswith("#: out")))
    run = _replay(str(bare), "--impl=reference")
    assert run.returncode == 0 and "compared with the reference's outcome" in run.stdout, \
        run.stdout + run.stderr
    assert "AGREES" in run.stdout
    run = _replay(str(bare), f"--impl={FAULTS}.recip_form")
    assert run.returncode == 1 and "DIVERGES" in run.stdout, run.stdout + run.stderr
    rejected = tmp_path / "rejected.ir"
    rejected.write_text("%a = buffer slot=0 dtype=f32 shape=[]\n%x = load %a\n"
                        "%g = gradient %x %x\n%h = gradient %g %nope\nstore %a %h\n")
    run = _replay(str(rejected), "--impl=reference")
    assert run.returncode == 0 and "a rejection (" in run.stdout and "line 4" in run.stdout, \
        run.stdout + run.stderr


def test_replay_diagnoses_a_case_whose_out_lines_cover_some_slots(tmp_path):
    """Before, `replay --diagnose` of max_ieee.ir (whose `#: out` lines cover slots 4 and 5
    only) against the reference plus 2 ulps crashed with KeyError: 0 in the pair search."""
    module = tmp_path / "two_ulps_off.py"
    module.write_text(
        "import numpy as np\nfrom gradient_conformance import reference\n"
        "def build(source):\n    run = reference.build(source)\n"
        "    def off(buffers):\n        out = run(buffers)\n"
        "        return {k: (v.view(np.uint32) + np.uint32(2)).view(np.float32)\n"
        "                if v.dtype == np.float32 else v for k, v in out.items()}\n"
        "    return off\n")
    run = _replay(str(CASES / "ops" / "max_ieee.ir"), f"--impl={module}", "--diagnose")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "diagnosis: " in run.stdout, run.stderr
    assert "location: line" in run.stdout, run.stdout


def test_a_flush_is_diagnosed_where_an_op_is_also_computed_otherwise():
    """Before, flush-results wrapped the spec's sin, so paired with a sin computed in
    binary64 (which replaces it) nothing reproduced the fast implementation's FTZ fault on
    sin: "no known variant". A flush now wraps whatever op it is applied over, and pairs are
    tried in both orders."""
    code, output, _ = suite("gradient_conformance.implementations.faults.flush_to_zero", "-k",
                            "forward_error_per_op and sin")
    assert code == 1, output[-3000:]
    lines = [line for line in output.splitlines() if line.startswith("diagnosis: ")]
    assert lines and all("[flush-results]" in line for line in lines), lines


def test_several_failures_of_one_check_are_described_by_the_first():
    """Hypothesis raises distinct failures of one check as a group: the report describes the
    first divergence in it, diagnosed and located, not the group's text."""
    from gradient_conformance.conformance.failure import diverged as _diverged
    from gradient_conformance.conformance.findings import Diverged, Finding, TapeCase
    from gradient_conformance.conformance.outcome import Outcome
    first = Diverged(Finding("first", Outcome("ok"), Outcome("rejected"), TapeCase([])))
    second = Diverged(Finding("second", Outcome("ok"), Outcome("rejected"), TapeCase([])))
    group = BaseExceptionGroup("two bugs", [ValueError("not one"),
                                            ExceptionGroup("inner", [first, second])])
    assert _diverged(group) is first
    assert _diverged(ValueError("no")) is None


CRASHES_AT_REDUCE = str(ROOT / "tests" / "impls" / "crashes_at_reduce.py")


def test_a_crash_at_build_is_no_rejection():
    """Before, a student's build that raised a TypeError at every reduce passed each
    rejection case file with a reduce in it as "rejected", and a rejection variant explained
    the crashes. A built-in programming error raised from build is a crash (impl-protocol.md):
    those files fail, saying so, and no variant is named; named as deliberate in
    CAPABILITIES["rejection"], the same TypeError is a rejection again."""
    from gradient_conformance import resource
    with_reduce = {f"test_case_file[{p.relative_to(resource('cases')).as_posix()}]"
                   for p in cases.case_paths([resource("cases")])
                   if p.parent.name == "reject" and " reduce " in p.read_text()}
    assert with_reduce
    code, output, _ = suite(CRASHES_AT_REDUCE, "-k", "test_case_file and reject",
                            "--no-shrink")
    assert code == 1, output[-3000:]
    failed = set(re.findall(r"^FAILED \S*::(test_case_file\[\S+\])", output, re.M))
    assert failed == with_reduce, output[-3000:]
    assert "rejected by a crash: TypeError: _mk() got multiple values for argument 'op'" \
        in output
    diagnoses = [line for line in output.splitlines() if line.startswith("diagnosis:")]
    assert diagnoses and not any("[" in line for line in diagnoses), diagnoses
    # The crashes are one cause, first in the verdict: one exception type at one place.
    verdict = output[output.index("conformance verdict"):].splitlines()
    assert verdict[1] == (f"{len(with_reduce)} divergences: TypeError at {CRASHES_AT_REDUCE}"
                          ":22 (_mk() got multiple values for argument 'op')"), verdict[:4]
    assert not any("no known variant explains" in line for line in verdict), verdict[:4]
    code, output, _ = suite(CRASHES_AT_REDUCE, "-k", "test_case_file and reject",
                            "--no-shrink", "--pass-env=REJECTION",
                            env={**os.environ, "REJECTION": "1"})
    assert code == 0, output[-3000:]


def test_a_line_number_is_read_from_the_implementation_s_own_words():
    """The place the suite adds (" (FILE:LINE)") and a number inside a path or a word are
    not the line: a checkout in /tmp/ci4 made "line 4" pass for a message that gave none."""
    from gradient_conformance.conformance.casefiles import gives_line
    where = " (/tmp/ci4/main/tests/impls/no_lines.py:19)"
    assert not gives_line("ValueError: this program is not valid" + where, 4)
    assert not gives_line("ValueError: not valid (raised in /x/y4.py:4)" + where, 4)
    assert not gives_line("SyntaxError: bad token v4", 4)
    assert gives_line("SyntaxError: line 4: bad token" + where, 4)
    assert gives_line("4: end closes nothing", 4) and not gives_line("line 14", 4)


def test_a_message_must_give_the_line_a_case_file_says_it_mentions():
    """Before, `#: error-mentions` was promised by SPEC and checked by nothing: a message
    without the line passed. A mention that gives a line asks the implementation's message
    for that number (ir.md: every error in the text with its line); the rest of a mention's
    words are the reference's own, left out, saying so; an implementation that declares
    CAPABILITIES["messages"] = False is told "messages: not compared"."""
    from gradient_conformance import resource
    with_lines = {f"test_case_file[{p.relative_to(resource('cases')).as_posix()}]"
                  for p in cases.case_paths([resource("cases")])
                  if re.search(r"^#: error-mentions line \d", p.read_text(), re.M)}
    assert len(with_lines) >= 10
    impl = str(ROOT / "tests" / "impls" / "no_lines.py")
    code, output, _ = suite(impl, "-k", "test_case_file", "--no-shrink")
    assert code == 1, output[-3000:]
    failed = set(re.findall(r"^FAILED \S*::(test_case_file\[\S+\])", output, re.M))
    assert failed == with_lines, output[-3000:]
    assert "the rejection's message does not give the line" in output
    assert "not asked of an implementation" in output  # the wording, left out, said
    code, output, _ = suite(impl, "-k", "test_case_file", "--no-shrink",
                            "--pass-env=MESSAGES", env={**os.environ, "MESSAGES": "0"})
    assert code == 0 and "messages: not compared" in output, output[-3000:]


def test_a_check_that_compared_nothing_fails():
    """A check that ran to its end with nothing on its ledger fails as the suite's own
    failure (the plugin calls require_compared after each check that takes the tally),
    saying what it left out; one output compared, or a divergence found, is enough."""
    import pytest

    from gradient_conformance.conformance.tallies import (
        BITS,
        NothingCompared,
        Tally,
        require_compared,
    )
    tally = Tally()
    tally.leave_out("made from a gradient", 3)
    with pytest.raises(NothingCompared, match=r"nothing was compared.*3 outputs left out: "
                       r"made from a gradient"):
        require_compared(tally)
    tally.compared(BITS, 1)
    require_compared(tally)


def test_crashes_are_causes_of_their_own_in_the_verdict_and_the_report():
    """Divergences whose implementation raised one exception type at one place of its code
    are one cause, before the variants; a crash elsewhere is another; the rest are counted
    apart from them (docs/diagnosis.md, "Crashes")."""
    from gradient_conformance.conformance.explain import verdict_lines
    from gradient_conformance.reports.records import Divergence, diagnoses

    def crash(place: str, status: str = "failure") -> Divergence:
        return Divergence(check="c", test_id="t", summary="s", actual_status=status,
                          actual_message=f"rejected by a crash: TypeError: bad ({place})",
                          diagnosis={"variants": []})
    run = [crash("my.py:5"), crash("my.py:5", "run-error"), crash("my.py:9"),
           Divergence(check="c", test_id="u", summary="s", diagnosis={"variants": []},
                      actual_status="ok")]
    lines = verdict_lines(run)
    assert lines[:2] == ["2 divergences: TypeError at my.py:5 (bad)",
                         "1 divergence: TypeError at my.py:9 (bad)"], lines
    assert lines[2].startswith("1 of 4 divergences no known variant explains alone or in a "
                               "pair, and no crash"), lines
    summary = diagnoses(run)
    assert [(e["says"], e["divergences"]) for e in summary] == [
        ("TypeError at my.py:5 (bad)", [1, 2]), ("TypeError at my.py:9 (bad)", [3]),
        ("no known variant reproduces these", [4])]
    # A RecursionError is said as running out of depth, and is a crash all the same (issue
    # 53: a student's recursion was counted among the divergences "and no crash").
    deep = Divergence(check="c", test_id="r", summary="s", actual_status="failure",
                      actual_message="it ran out of recursion depth: RecursionError: maximum "
                      "recursion depth exceeded (my.py:12)", diagnosis={"variants": []})
    lines = verdict_lines([deep])
    assert lines == ["1 divergence: RecursionError at my.py:12 (maximum recursion depth "
                     "exceeded)"], lines


def test_the_lines_about_a_divergence_agree_with_each_other_and_the_case():
    """From the student's run (issue 44, item 6): the op table said that no explanation
    implicates `reduce` while 53 crashes were located at one; a location said "the rule is
    named above" where none was; a case headed `#: error invalid` was "not reduced: the
    reference's rejection does not name invalid". Each line now comes from the record."""
    from gradient_conformance.conformance.diagnosis.locate import locate
    from gradient_conformance.conformance.outcome import Outcome
    from gradient_conformance.conformance.readings import Reading
    from gradient_conformance.conformance.readings import rejected_as as _kind
    from gradient_conformance.reports.html import op_view
    from gradient_conformance.reports.records import Divergence, Report
    crash = Divergence(check="test_case_file", test_id="t", summary="s",
                       location={"line": 3, "kind": "crash", "op": "reduce"})
    view = op_view(Report(implementation={"name": "x", "version": "", "spec": "x",
                                          "capabilities": {}},
                          ops={"reduce": {"test_case_file": [4, 1]},
                               "bitcast": {"test_case_file": [4, 0]}},
                          divergences=[crash]))
    assert view["left_out"] == ["bitcast"] and view["elsewhere"] == [("a crash at `reduce`", 1)]
    two = ("%a = buffer slot=0 dtype=f32 shape=[2]\n%x = load %a\n%g = gradient %x %x\n"
           "%h = gradient %x %x\n")
    reading = Reading(two)
    where = locate(None, reading, {}, reading.outcome({}, build_only=True), Outcome("ok"))
    assert "named above" not in where.text() and "loss-not-f32-scalar" in where.text(), \
        where.text()
    assert _kind(Reading("%i = range -1\nend %i\n")) == "invalid"
    assert _kind(Reading("%a = buffer slot=0 dtype=f32 shape=[]\n")) == ""


def test_a_crash_s_message_is_shown_once_and_cut_to_its_ends():
    """Issue 53: one student's TypeError filled 9,088 lines of the terminal, once for each
    divergence it caused. What the implementation said is shown to MESSAGE_LINES lines (its
    start and its end, the cut said; the report keeps it whole), and a crash whose cause
    (type and place) an earlier divergence of the process showed is only named."""
    from gradient_conformance.reports.records import Divergence
    from gradient_conformance.reports.terminal import MESSAGE_LINES, terminal_text
    said = "\n".join(["TypeError: bad operand (student.py:3)",
                      *(f"  frame {k}" for k in range(9000))])
    d = Divergence(check="c", test_id="t", summary="the implementation misbehaved",
                   source="%a = buffer slot=0 dtype=f32 shape=[]\n", actual_status="failure",
                   actual_message=said)
    text = terminal_text(d)
    marked = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(marked) == MESSAGE_LINES + 1, len(marked)
    assert "| ... [8961 lines cut, of 9001; the report has them all] ..." in marked
    assert marked[0] == "| TypeError: bad operand (student.py:3)" and \
        marked[-1] == "|   frame 8999"
    again = terminal_text(d, shown_before="TypeError at student.py:3")
    assert not any(line.startswith("| ") for line in again.splitlines())
    assert "the same crash as an earlier divergence of this run (TypeError at student.py:3)" \
        in again
