"""The program reducer (docs/diagnosis.md, "Reduction"): the fewest statements that still show a
divergence, with its signature kept and its comparison the check's."""

from __future__ import annotations

import json

import pytest

from gradient_conformance.conformance import findings, readings
from gradient_conformance.conformance.divergence import subject
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.reduce import reduce_finding
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.reference.errors import RULES
from gradient_conformance.reference.syntax import format_program
from tests.conftest import FAULTS, ROOT, suite

# The order bug's example, padded with statements the divergence does not need: a dead
# chain, a second gradient nobody stores, and a value the stored one is made through.
PADDED = """\
%in = buffer slot=0 dtype=f32 shape=[]
%out = buffer slot=1 dtype=f32 shape=[3]
%k = buffer slot=2 dtype=f32 shape=[3]
%x = load %in
%A = load %k 0
%B = load %k 1
%C = load %k 2
%dead = mul %A %B
%dead2 = add %dead %C
%ua = mul %x %A
%ub = mul %x %B
%uc = mul %x %C
%p = add %ua %ub
%y = add %p %uc
%g = gradient %y %x
%h = gradient %uc %x
%q = add %uc %ub
%y2 = add %q %ua
%g2 = gradient %y2 %x
%g3 = mul %g2 %A
%g4 = mul %g3 %A
store %out %g 0
store %out %g4 1
"""


@pytest.fixture(scope="module")
def order_bug():
    impl = load(f"{FAULTS}.creation_order", in_process=True)
    yield impl
    impl.close()


def _finding(impl, source: str, buffers) -> findings.Finding:
    reading = readings.Reading(source)
    want = reading.outcome(buffers)
    got = impl.run_case(source, buffers, reading.slots)
    difference = compare(want, got)
    assert difference is not None, "the fault must show in the padded program"
    return findings.Finding(f"the rule: {difference}", want, got,
                           findings.ProgramCase(reading, buffers), difference)


def _buffers():
    import numpy as np
    return {0: np.array(1.0, dtype=np.float32),
            1: np.zeros(3, dtype=np.float32),
            2: np.array([1.0, -1e8, 1e8], dtype=np.float32)}


def test_a_padded_program_is_reduced_to_one_no_statement_of_which_can_go(order_bug):
    finding = _finding(order_bug, PADDED, _buffers())
    reduction = reduce_finding(finding, order_bug)
    reduced = reduction.finding
    assert reduction.minimal and not reduction.reason
    assert reduction.before == 23 and reduction.after <= 16, reduction.line()
    assert subject(reduced) == subject(finding)
    assert reduced.summary.startswith("the rule: ")  # the check's words kept
    text = reduced.case.text
    assert "%dead" not in text and "%h" not in text and "%g3" not in text, text
    # Checked apart from the reducer's own candidates: removing any one statement that
    # defines nothing used, or nothing at all, loses the divergence or the program.
    statements = reduced.case.reading.statements
    for k, s in enumerate(statements):
        rest = statements[:k] + statements[k + 1:]
        if s.target and any(o.text == s.target for r in rest for o in r.operands):
            continue
        reading = readings.Reading(format_program(rest))
        if reading.error is not None:
            continue
        buffers = {n: a for n, a in finding.case.buffers.items() if n in reading.slots}
        want = reading.outcome(buffers)
        if want.status != "ok":
            continue
        got = order_bug.run_case(reading.source, buffers, reading.slots)
        again = compare(want, got)
        assert again is None or subject(findings.Finding(
            "", want, got, findings.ProgramCase(reading, buffers), again)) != subject(finding), \
            f"statement {k + 1} could go: {format_program(rest)}"
    assert reduction.line().startswith("reduced: from 23 statements to ")
    # Reduced again, nothing goes: the finding is kept as it is, its text and lines too.
    again = reduce_finding(reduced, order_bug)
    assert again.finding is reduced and again.minimal and again.after == again.before


def test_the_reducer_keeps_to_the_check_s_comparison(order_bug):
    finding = _finding(order_bug, PADDED, _buffers())
    finding.comparison = "truth"
    reduction = reduce_finding(finding, order_bug)
    assert reduction.finding is finding and "true derivative" in reduction.reason
    tape = findings.Finding("x", Outcome("ok"), Outcome("ok"),
                           findings.TapeCase([["input", 1.0]]))
    assert "a tape" in reduce_finding(tape, order_bug).reason


def test_the_budget_stops_it_and_it_says_not_minimal(order_bug):
    finding = _finding(order_bug, PADDED, _buffers())
    reduction = reduce_finding(finding, order_bug, runs=2)
    assert not reduction.minimal and reduction.runs == 2
    assert "not minimal" in reduction.line()


def test_a_case_file_s_divergence_is_shown_reduced_naming_the_file(tmp_path):
    code, output, _ = suite(f"{FAULTS}.creation_order", "-k", "accumulation_order", "-q",
                            cwd=tmp_path, shrink=True)
    assert code == 1, output[-2000:]
    assert "case file examples/accumulation_order.ir" in output
    assert "reduced: from 18 statements to " in output, output[-3000:]


def test_the_oracle_failing_on_a_smaller_program_is_said_not_fatal(order_bug, monkeypatch):
    """A smaller program the reference cannot run (raising other than an IRError) is the
    suite's bug: the reduction goes on without it and its line says so."""
    finding = _finding(order_bug, PADDED, _buffers())
    real = readings.Reading.outcome

    def flaky(self, buffers, *args, **kwargs):
        if "%dead" not in self.source:
            raise TypeError("a bug of the oracle's")
        return real(self, buffers, *args, **kwargs)
    monkeypatch.setattr(readings.Reading, "outcome", flaky)
    reduction = reduce_finding(finding, order_bug)
    assert reduction.oracle_errors and "TypeError: a bug of the oracle's" in reduction.line()
    assert "%dead" in reduction.finding.case.text or reduction.finding is finding


def test_a_store_index_that_is_a_buffer_is_rejected_at_build():
    """Found by the reducer: the reference took `store %o 1.0 %b` with %b an i32 scalar
    buffer, and failed running it (cases/errors/buffer_as_store_index.ir)."""
    reading = readings.Reading("%b = buffer slot=0 dtype=i32 shape=[]\n"
                              "%o = buffer slot=1 dtype=f32 shape=[3]\nstore %o 1.0 %b\n")
    outcome = reading.outcome({})
    assert outcome.status == "rejected" and "load it first" in outcome.message


ACCEPTS = str(ROOT / "tests" / "impls" / "accepts_and_traps.py")


def test_missed_rejections_are_reduced_and_explained_without_the_stage_failing(tmp_path):
    """Issue 53: for an implementation that declares integer division traps, the reducer's
    trap check measured candidates the graph refuses (x-literal lifted on a literal shared
    with a vector) and the stage failed; a reduced program was rejected by another problem
    too (a buffer used as a value); and variants were named from statuses alone. Now every
    missed rejection is reduced, no reduced program breaks anything the program as found
    did not, and none is named: this implementation gives no variant's values."""
    report = tmp_path / "r.json"
    code, output, _ = suite(ACCEPTS, "-k", "every_rejection_in_every_disguise", "-q",
                            f"--report-json={report}", cwd=tmp_path)
    assert code == 1, output[-3000:]
    assert "the failure stage failed" not in output and "INTERNALERROR" not in output
    data = json.loads(report.read_text())
    found = data["divergences"]
    assert found and all(d["signature"][1] in RULES for d in found)
    for d in found:
        assert "buffer, a handle and not a value" not in d["case_text"], d["case_text"]
        reading = readings.Reading(d["source"])
        assert readings.rejected_as(reading) == d["signature"][1], d["source"]
        # The saved case keeps the kind it is rejected by.
        assert f"#: error {d['signature'][1]}\n" in d["case_text"], d["case_text"]
        assert "confirmed on" not in d["diagnosis_line"], d["diagnosis_line"]
