"""Hypotheses tested before they are named: docs/diagnosis.md, "Confirmation".

Two faults written to look like a variant on one program (picked by condition: a g of -0.0
at a where, a NaN maximum), each reproduced by the variant on that program and by nothing on
the next program that separates them: the diagnosis names the variant before the experiment,
and after it says that other programs refute it. The variant itself, run as the
implementation, is confirmed and named.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradient_conformance.conformance import casefiles, findings, readings
from gradient_conformance.conformance.diagnosis.confirm import bears_out
from gradient_conformance.conformance.diagnosis.diagnose import diagnose_case
from gradient_conformance.conformance.explain import explain_finding
from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.reference import cases
from tests.conftest import ROOT

# The where's g is -0.0 (the loss is w * -0.0), and both of its sides are x: the fault's
# -0.0 on the unselected side is what where-both's g gives there.
WHERE = """%a = buffer slot=0 dtype=f32 shape=[]
%o = buffer slot=1 dtype=f32 shape=[]
%x = load %a
%c = cmplt %x 0.0
%w = where %c %x %x
%y = mul %w -0.0
%g = gradient %y %x
store %o %g
"""
# The maximum is NaN: no element equals it, and the fault's max(count, 1) gives every share
# 0, as "all of g to every maximum" does; at a tie the two part.
REDUCE_MAX = """%a = buffer slot=0 dtype=f32 shape=[3]
%o = buffer slot=1 dtype=f32 shape=[3]
%x = load %a
%m = reduce %x op=max
%g = gradient %m %x
store %o %g
"""
LOOKALIKES = [
    pytest.param("where_negative_zero.py", WHERE, [1.5], "where-both", id="where"),
    pytest.param("reduce_max_nan.py", REDUCE_MAX, [1.0, np.nan, 2.0], "reduce-max-all",
                 id="reduce-max"),
]


def _finding(impl, source: str, values) -> findings.Finding:
    reading = readings.Reading(source)
    slots = reading.slots
    buffers = {0: np.array(values, np.float32).reshape(slots[0][1]),
               1: np.zeros(slots[1][1], np.float32)}
    want = reading.outcome(buffers)
    got = impl.run_case(source, buffers, slots)
    return findings.Finding("", want, got, findings.ProgramCase(reading, buffers))


@pytest.mark.parametrize(("fault", "source", "values", "lookalike"), LOOKALIKES)
def test_a_lookalike_is_refuted_by_other_programs(fault, source, values, lookalike):
    impl = load(str(ROOT / "tests" / "impls" / fault))
    try:
        finding = _finding(impl, source, values)
        assert finding.got.status == "ok" and finding.want.buffers[1].tobytes() != \
            finding.got.buffers[1].tobytes()
        # Before the experiment: the variant reproduces the found program.
        reproduced = diagnose_case(finding.case.reading, finding.case.buffers, finding.want,
                                   finding.got)
        assert lookalike in reproduced.variants
        # After: another program separates it from the spec, and the implementation does
        # otherwise there, so it is not named; the line says where it was refuted.
        diagnosis, where = explain_finding(finding, impl)
    finally:
        impl.close()
    assert diagnosis.variants == [] and lookalike in diagnosis.candidates
    [evidence] = [e for e in diagnosis.evidence if e["name"] == lookalike]
    assert evidence["against"], diagnosis.line()
    line = diagnosis.line()
    assert line.startswith("diagnosis: no known variant confirmed: ") and \
        f"[{lookalike}] gives these results here, but the implementation did otherwise on " \
        in line, line
    # The location is one record with the diagnosis: it names no refuted variant.
    assert lookalike not in where.text(), where.text()


@pytest.mark.parametrize(("fault", "source", "values", "lookalike"), LOOKALIKES)
def test_the_variant_itself_is_confirmed_and_named(fault, source, values, lookalike):
    impl = load(f"variant:{lookalike}")
    try:
        diagnosis, _ = explain_finding(_finding(impl, source, values), impl)
    finally:
        impl.close()
    assert lookalike in diagnosis.variants, diagnosis.line()
    [evidence] = [e for e in diagnosis.evidence if e["name"] == lookalike]
    assert evidence["support"] and not evidence["against"]
    assert f"confirmed on {len(evidence['support'])} other program" in diagnosis.line()
    assert diagnosis.experiment["ran"] >= len(evidence["support"])


def _ok(*values) -> Outcome:
    return Outcome("ok", buffers={0: np.array(values, np.float32)})


def test_an_element_only_the_implementation_changes_is_another_cause_s():
    """Bearing out is judged where the hypothesis departs from the spec: there the
    implementation must give its value; elsewhere a second fault may show and is not
    evidence against it. A status or a shape is the whole claim."""
    spec, theirs = _ok(1.0, 2.0), _ok(1.0, 3.0)  # the hypothesis departs at element 1
    assert bears_out(spec, spec, _ok(5.0, 2.0), 0) is None  # it does not depart: no evidence
    assert bears_out(spec, theirs, _ok(1.0, 3.0), 0) is True
    assert bears_out(spec, theirs, _ok(9.0, 3.0), 0) is True  # element 0: another cause
    assert bears_out(spec, theirs, _ok(1.0, 2.0), 0) is False  # the spec's value there
    assert bears_out(spec, theirs, Outcome("ok", buffers={0: np.zeros(3, np.float32)}),
                     0) is False
    rejected = Outcome("rejected")
    assert bears_out(spec, rejected, Outcome("rejected"), 0) is True
    assert bears_out(spec, rejected, _ok(1.0, 3.0), 0) is False
    assert bears_out(rejected, theirs, _ok(9.0, 3.0), 0) is False  # accepted: all its values
    assert bears_out(rejected, theirs, Outcome("rejected"), 0) is False  # the spec's status


def test_a_crash_or_a_rejection_the_hypothesis_does_not_change_is_another_cause_s():
    """Where the hypothesis keeps the spec's status, the implementation's own rejection or
    crash is another divergence's (an empty max it raises on), not evidence against it."""
    spec, theirs = _ok(1.0, 2.0), _ok(1.0, 3.0)
    assert bears_out(spec, theirs, Outcome("rejected", message="line 3: no"), 0) is None
    assert bears_out(spec, theirs, Outcome("failure", reason="crash"), 0) is None
    assert bears_out(spec, Outcome("rejected"), Outcome("failure", reason="crash"), 0) is None


def test_no_sign_of_a_zero_decides_where_the_check_compared_with_the_truth():
    """A check against the true derivative counts no sign of a zero (abs(-0.0 - 0.0) is 0);
    the experiment on what it found counts none either, for or against."""
    spec, theirs = _ok(1.0, 1.0), _ok(1.0, 0.0)  # the hypothesis departs at element 1
    assert bears_out(spec, theirs, _ok(1.0, -0.0), 0) is False  # bit for bit: a refutation
    assert bears_out(spec, theirs, _ok(1.0, -0.0), 0, zero_signs=False) is True
    assert bears_out(_ok(1.0, 0.0), _ok(1.0, -0.0), _ok(1.0, 0.0), 0, zero_signs=False) is None


def test_the_hypothesis_that_explains_more_is_named_and_a_decision_only_where_it_holds():
    """`no-hash-consing` and `attributes-in-written-order` both reproduce a program whose one
    reduce is written with its attributes in two orders. Run as the implementation, the one
    that merges no nodes at all is also borne out where the attributes are written one way
    (hash_consing_shares.ir), where the other keeps the spec's values: it alone is named,
    and the expectation is not said to rest on the decision of attribute order. The variant
    that reads that decision otherwise is named, with the decision, where it is the cause."""
    path = ROOT / "cases" / "gradient" / "attributes_in_any_order.ir"
    case = cases.load_case(path)
    source = case.source
    for name, named, decided in (("no-hash-consing", ["no-hash-consing"], []),
                                 ("attributes-in-written-order",
                                  ["attributes-in-written-order"],
                                  ["attributes-in-written-order"])):
        impl = load(f"variant:{name}")
        try:
            reading = readings.Reading(source)
            buffers = casefiles.case_file_buffers(case, reading.slots)
            want = reading.outcome(buffers)
            got = impl.run_case(source, buffers, reading.slots)
            diagnosis, _ = explain_finding(findings.Finding(
                "", want, got, findings.ProgramCase(reading, buffers)), impl)
        finally:
            impl.close()
        assert set(diagnosis.candidates) == {"no-hash-consing", "attributes-in-written-order"}
        assert diagnosis.variants == named and diagnosis.decisions == decided, \
            (name, diagnosis.line(), diagnosis.evidence)
        said = diagnosis.line()
        assert ("rests on a decision" in said) == bool(decided), said


def test_each_decision_a_variant_reads_otherwise_is_quoted_from_spec_md():
    """A variant that reads a decision of SPEC.md otherwise quotes it: the quote is in SPEC.md,
    in the section the variant names (docs/diagnosis.md, "Decisions")."""
    import re

    from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
    spec = (ROOT / "SPEC.md").read_text()
    sections = dict(re.findall(r"^## (.+)\n((?:(?!^## ).*\n)*)", spec, re.M))
    deciding = [v for v in CATALOGUE.values() if v.decision]
    assert len(deciding) >= 4
    for v in deciding:  # quoted as one line, wherever SPEC.md wraps it
        assert v.decision.startswith("**Decision") and "\n" not in v.decision, v.name
        assert v.decision in " ".join(sections[v.section].split()), v.name


@pytest.mark.parametrize(("case_file", "variant"), [
    ("errors/reduce_axis_unsorted.ir", "axis-in-any-order"),
    ("errors/negative_range.ir", "negative-range-runs-none"),
    ("errors/body_name_defined_again.ir", "body-names-scoped"),
    ("errors/body_shadows_outer_name.ir", "body-names-scoped"),
    ("gradient/attributes_in_any_order.ir", "attributes-in-written-order"),
    ("ops/function_body_names_its_own.ir", "function-names-global")])
def test_an_expectation_resting_on_a_decision_says_so(case_file, variant):
    """An implementation that reads a decision of SPEC.md the other way is told that the
    course text, read otherwise, is what it did, and that the expectation rests on a decision
    of this project, quoted; a divergence that rests on no decision does not say so."""
    from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
    from gradient_conformance.reference import cases
    case = cases.load_case(ROOT / "cases" / case_file)
    reading = readings.Reading(case.source)
    impl = load(f"variant:{variant}")
    try:
        if case.error:
            got = impl.build_only(case.source)
            finding = findings.Finding("", Outcome("rejected", message=case.error), got,
                                      findings.ProgramCase(reading), rule=case.error)
        else:
            buffers = casefiles.case_file_buffers(case, reading.slots)
            finding = findings.Finding("", reading.outcome(buffers), impl.run_case(
                case.source, buffers, reading.slots), findings.ProgramCase(reading, buffers))
        diagnosis, _ = explain_finding(finding, impl)
    finally:
        impl.close()
    line = diagnosis.line()
    assert diagnosis.variants == [variant] and diagnosis.decisions == [variant], line
    assert line.startswith("diagnosis: the course text read otherwise where SPEC.md decides, "
                           "one that ") and "This expectation rests on a decision of this " \
        "project, not on the course's text" in line, line
    assert CATALOGUE[variant].decision.replace("**", "") in line, line
    impl = load(str(ROOT / "tests" / "impls" / "where_negative_zero.py"))
    try:
        other, _ = explain_finding(_finding(impl, WHERE, [1.5]), impl)
    finally:
        impl.close()
    assert other.decisions == [] and "rests on a decision" not in other.line()


DETACHED = """%a = buffer slot=0 dtype=f32 shape=[]
%x = load %a
%d = detach %x
%y = mul %d %x
%g = gradient %y %x
store %a %g
"""


@pytest.mark.parametrize(("said", "named"), [("line 1: detach is not supported", False),
                                             ("line 5: x is reached through a detach", True)])
def test_a_rejection_variant_is_the_implementation_s_only_for_the_same_line(said, named):
    """A rejection is the variant's only where the implementation's message gives the line
    the variant rejects at: a rejection of the whole program at line 1 is not "rejects a
    gradient whose loss reaches x through a detach" (line 5), though both are rejections."""
    reading = readings.Reading(DETACHED)
    want = reading.outcome({}, build_only=True)
    got = Outcome("rejected", message=said)
    assert want.status == "ok"
    diagnosis = diagnose_case(reading, {}, want, got)
    assert ("rejects-through-detach-or-cast" in diagnosis.variants) is named, diagnosis.line()


def test_a_decision_whose_control_program_the_implementation_still_fails_is_not_named():
    """PyTorch, through the kit, merges no computed nodes at all: on the program whose one
    reduce is written with its attributes in two orders it gives what reading the decision
    of attribute order otherwise gives, and the same wrong value on the control program,
    the attributes written in one order (Variant.control). So the decision is not named,
    and the expectation is not said to rest on it (docs/diagnosis.md, "Decisions"): either
    the control program speaks against it or, where no-hash-consing (what the kit does)
    reproduces the results, that variant subsumes it."""
    pytest.importorskip("torch")
    path = ROOT / "cases" / "gradient" / "attributes_in_any_order.ir"
    case = cases.load_case(path)
    reading = readings.Reading(case.source)
    buffers = casefiles.case_file_buffers(case, reading.slots)
    impl = load("gradient_conformance.adapters.torch_impl")
    try:
        got = impl.run_case(case.source, buffers, reading.slots)
        diagnosis, _ = explain_finding(findings.Finding(
            "", reading.outcome(buffers), got, findings.ProgramCase(reading, buffers)), impl)
    finally:
        impl.close()
    assert "attributes-in-written-order" in diagnosis.candidates
    assert "attributes-in-written-order" not in diagnosis.variants and not diagnosis.decisions
    [evidence] = [e for e in diagnosis.evidence if e["name"] == "attributes-in-written-order"]
    assert evidence["against"].startswith("the control program") or \
        evidence.get("subsumed", "").startswith("no-hash-consing"), evidence
    assert "rests on a decision" not in diagnosis.line()


def test_the_separating_programs_reach_the_variant_s_own_dimension():
    """Issue 53: two faults were named by a variant that no separating program could tell
    from them. A sum folded from +0.0 reproduces numpy's on short rows (both +0.0 for a row of
    -0.0); a row of sixteen (cases/ops/reduce_long_row.ir), where numpy's eight accumulators
    keep what a left fold loses, refutes it."""
    impl = load(str(ROOT / "tests" / "impls" / "sum_from_zero.py"))
    try:
        source = ("%a = buffer slot=0 dtype=f32 shape=[3]\n%o = buffer slot=1 dtype=f32 "
                  "shape=[]\n%x = load %a\n%s = reduce %x op=add\nstore %o %s\n")
        reading = readings.Reading(source)
        buffers = {0: np.full(3, -0.0, np.float32), 1: np.zeros((), np.float32)}
        got = impl.run_case(source, buffers, reading.slots)
        diagnosis, _ = explain_finding(findings.Finding(
            "", reading.outcome(buffers), got, findings.ProgramCase(reading, buffers)), impl)
    finally:
        impl.close()
    assert "numpy-sum" in diagnosis.candidates and "numpy-sum" not in diagnosis.variants
    [evidence] = [e for e in diagnosis.evidence if e["name"] == "numpy-sum"]
    assert "reduce_long_row.ir" in evidence["against"], evidence


def test_literals_read_to_nineteen_digits_are_not_named_binary64():
    """The second fault of the test above: 1 + 2^-24 + 2^-60 rounds down when read to 19
    digits and when rounded through binary64 first; the tie of
    cases/ops/literals_past_nineteen_digits.ir parts them."""
    impl = load(str(ROOT / "tests" / "impls" / "literals_19_digits.py"))
    try:
        source = ("%o = buffer slot=0 dtype=f32 shape=[]\n"
                  "store %o 1.00000005960464477539930797162372371\n")
        reading = readings.Reading(source)
        buffers = {0: np.zeros((), np.float32)}
        got = impl.run_case(source, buffers, reading.slots)
        want = reading.outcome(buffers)
        assert got.buffers[0].tobytes() != want.buffers[0].tobytes()
        diagnosis, _ = explain_finding(findings.Finding(
            "", want, got, findings.ProgramCase(reading, buffers)), impl)
    finally:
        impl.close()
    assert "literals-through-binary64" in diagnosis.candidates, diagnosis.line()
    assert "literals-through-binary64" not in diagnosis.variants, diagnosis.line()
    [evidence] = [e for e in diagnosis.evidence if e["name"] == "literals-through-binary64"]
    assert "literals_past_nineteen_digits.ir" in evidence["against"], evidence
