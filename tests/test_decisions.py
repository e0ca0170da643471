"""The decisions of SPEC.md, where the course's text is silent, each marked in one form, and
every case file whose expectation rests on one labelled with it (issue 53; SPEC.md's
opening, docs/diagnosis.md, "Decisions").

A student graded on the course's text must see which failures rest on this project's
decisions. A file rests on a decision where the variant reading it the other way changes the
spec's outcome there (Variant.decision), or, for a decision without such a variant, where the
program reaches what it decides (DECIDED: a test of the program's text and build, written
from the decision's own words)."""

from __future__ import annotations

import re

import pytest

from gradient_conformance import resource
from gradient_conformance.conformance.casefiles import case_file_buffers
from gradient_conformance.conformance.diagnosis.diagnose import decisions_of
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.readings import Reading, rejection
from gradient_conformance.reference import cases
from gradient_conformance.reference.conditions import lifted
from gradient_conformance.reference.errors import GradientError
from tests.conftest import ROOT, suite

MARK = re.compile(r"\*\*Decisions? \(([a-z0-9-]+)\)")


def _spec_text() -> str:
    """SPEC.md without its inline code, where a marker may be quoted rather than made."""
    return re.sub(r"`[^`\n]*`", "", (ROOT / "SPEC.md").read_text())


def spec_decisions() -> list[str]:
    return MARK.findall(_spec_text())


def test_every_decision_of_spec_md_has_a_name_of_its_own():
    text = _spec_text()
    names = spec_decisions()
    assert len(names) >= 20 and len(set(names)) == len(names), names
    unnamed = [m.start() for m in re.finditer(r"\*\*Decisions?\b(?! \()", text)]
    assert not unnamed, [text[k:k + 80] for k in unnamed]
    assert "loads-read-statically" in names


def test_a_variant_reads_a_named_decision_of_spec_md_otherwise():
    names = set(spec_decisions())
    deciding = [v for v in CATALOGUE.values() if v.decision]
    assert len(deciding) >= 5
    for v in deciding:
        found = MARK.match(v.decision)
        assert found and found.group(1) in names, (v.name, v.decision)


def _names_without_brackets(reading: Reading) -> bool:
    return any(isinstance(s.attr("axis"), int) or s.attr("axis") == ()
               for s in reading.statements or ())


def _gradient_of_itself(reading: Reading) -> bool:
    return any(s.op == "gradient" and len(s.operands) == 2 and
               s.operands[0].text == s.operands[1].text for s in reading.statements or ())


def _call_with_a_literal(reading: Reading) -> bool:
    return any(s.op == "call" and any(o.kind not in ("name", "func") for o in s.operands)
               for s in reading.statements or ())


def _unnamed_value_op(reading: Reading) -> bool:
    problem = rejection(reading)
    return problem is not None and "statement needs a name" in str(problem)


def _several_rules(reading: Reading) -> bool:
    problem = rejection(reading)
    if not isinstance(problem, GradientError) or reading.statements is None:
        return False
    _, met = lifted(reading.statements, problem.rule)
    return any(isinstance(p, GradientError) for p in met)


def _expand_keeping_a_one(reading: Reading) -> bool:
    """An expand, in a program with a gradient, of an operand with a size-1 dim that stays
    size 1: the rule sums over it all the same."""
    if rejection(reading) is not None or not any(
            s.op == "gradient" for s in reading.statements or ()):
        return False
    program = reading.program()
    return any(getattr(d, "node", None) is not None and d.node.op == "expand" and
               any(a == 1 and b == 1 for a, b in zip(
                   (1,) * (len(d.node.shape) - len(d.node.operands[0].shape)) +
                   d.node.operands[0].shape, d.node.shape, strict=True))
               for d in program.statements)


def _load_of_a_stored_buffer(reading: Reading) -> bool:
    """A load of a buffer the program also stores into, in a program with a gradient."""
    statements = reading.statements or ()
    stored = {s.operands[0].text for s in statements if s.op == "store"}
    return any(s.op == "gradient" for s in statements) and any(
        s.op == "load" and s.operands[0].text in stored for s in statements)


# Decisions without a variant that reads them otherwise: where a program reaches what the
# decision decides, read from the decision's words in SPEC.md.
DECIDED = {
    "unnamed-value-op": _unnamed_value_op,  # a value op without a name is an error
    "axis-lists": _names_without_brackets,  # `axis=1` means [1]; `axis=[]` reduces nothing
    "gradient-x-x": _gradient_of_itself,  # `gradient %x %x` is the literal 1.0
    "parameters-not-literals": _call_with_a_literal,  # a literal argument is no literal param
    "first-rule-reported": _several_rules,  # several rules apply: the first is reported
    "expand-summed-axes": _expand_keeping_a_one,  # every size-1 dim of a is summed
    "loads-read-statically": _load_of_a_stored_buffer,  # which stores a load reads
}


def _case_files():
    """The package's case files, but the worked examples: those are the course's own
    (../shared/spec/examples, byte for byte), so their expectations are the course's."""
    root = resource("cases")
    return [p for p in cases.case_paths([root]) if p.suffix == ".ir" and
            p.relative_to(root).parts[0] != "examples"]


def rests_on(path) -> set[str]:
    """The decisions a case file's expectation rests on, by the variants and by DECIDED."""
    case = cases.load_case(path)
    reading = Reading(case.source)
    found = {name for name, reaches in DECIDED.items() if reaches(reading)}
    if reading.statements is None:
        return found
    buffers = case_file_buffers(case, reading.slots) if case.error is None else {}
    build_only = case.error is not None
    want = reading.outcome(buffers, build_only=build_only)
    for name in decisions_of(reading, buffers, want, build_only=build_only):
        found.add(MARK.match(CATALOGUE[name].decision).group(1))
    return found


@pytest.mark.parametrize("path", _case_files(), ids=lambda p: p.relative_to(
    resource("cases")).as_posix())
def test_a_case_file_resting_on_a_decision_says_so(path):
    case = cases.load_case(path)
    assert set(case.decisions) <= set(spec_decisions()), case.decisions
    missing = rests_on(path) - set(case.decisions)
    assert not missing, f"{path.name} rests on {sorted(missing)}: add '#: decision NAME'"


def test_a_labelled_case_file_s_failure_says_it_rests_on_the_decision():
    """An implementation that reads the decision of attribute order the other way fails the
    file labelled with it, and the failure says the file's expectation follows SPEC.md's
    decision, where the course's text is silent."""
    code, output, _ = suite("variant:attributes-in-written-order", "-k",
                            "test_case_file and attributes_in_any_order")
    assert code == 1, output[-3000:]
    assert "the file is labelled SPEC.md's Decision (attribute-order): its expectation " \
           "follows this project's decision where the course's text is silent" in output, \
        output[-3000:]
