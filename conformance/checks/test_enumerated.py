"""Enumerated from the tables rather than drawn (generators/enumerations.py): every rule at
every value class of its operands and of g; every pair of statements the spec makes one
node or two, written in each way the grammar allows; and every rejection rule in every
disguise, with the near misses that must be accepted. docs/generators.md, "Enumerations";
SPEC.md, "The rules", "Hash consing" and "When gradient is rejected"."""

from __future__ import annotations

import pytest

from gradient_conformance.conformance import running
from gradient_conformance.generators.enumerations import (
    enumerated_cases,
    forward_cases,
    identity_cases,
    rejection_cases,
    structure_cases,
)
from gradient_conformance.reference.ops import TRANSCENDENTAL, features_of

RANK = 3  # where the suite runs these checks (plugin.rank): cheaper, more telling first
FORWARD = {case.name: case for case in forward_cases()}
SHAPES = {case.name: case for case in structure_cases(gradients=True)}
CASES = {case.name: case for case in enumerated_cases()
         if case.name not in FORWARD and case.name not in SHAPES}
IDENTITY = {case.name.split("/")[1]: case for case in identity_cases()}
REJECTIONS = {case.name: case for case in rejection_cases()}
BITS_WHY = ("does not claim bit-exact gradients (CAPABILITIES): the value classes enumerated "
            "here have no true derivative to compare against")


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_at_every_value_class(impl, tally, name):
    """One rule's enumerated program, bit for bit, for an implementation that claims
    bit-exact gradients (within its declared ulps where the rule's op is exp2, log2 or sin);
    a divergence is reported on the program narrowed to a combination that differs
    (running.check_enumerated)."""
    if not impl.capabilities.get("bit_exact_gradients", True):
        # At an infinity, a NaN or a signed zero the rules give exact values where no true
        # derivative exists to compare with: what these programs are about is bits.
        pytest.skip(BITS_WHY)
    case = CASES[name]
    tally.case(features_of(case.source))
    ulps = impl.ulps(case.op) if case.op in TRANSCENDENTAL else 0
    running.check_enumerated(impl, tally, case, ulps=ulps)


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_op_at_every_class_of_every_dtype(impl, tally, name):
    """An op's value past f32, bit for bit (SPEC.md, "Operations"): every i32 and bool op at
    every pair of classes of its dtype (the ends of the range, the shift counts' edges,
    zero and the signs), its operand twice, each class a literal on either side; every cast
    and bitcast from every class of each dtype (f32's fractions, subnormals, infinities and
    NaN among them), loaded and as a literal. No gradient: an implementation that does not
    claim bit-exact gradients is held to these too. The trapping pairs of idiv and mod are
    a case of their own, not sent to an implementation whose division traps."""
    case = FORWARD[name]
    tally.case(features_of(case.source))
    running.check_enumerated(impl, tally, case)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_structure_at_every_shape(impl, tally, name):
    """reduce (add, max), reshape and expand of a value of each shape class (ranks 0 to 3, a
    0-length and a 1-length dim) at every axis set and every shape it may take, each one's
    gradient (their values are test_op_at_every_class_of_every_dtype's `shape.value`
    cases), compared as the gradient check compares: bit for bit, or against the true
    derivative for an implementation that does not claim bit-exact gradients."""
    case = SHAPES[name]
    tally.case(features_of(case.source))
    running.check_enumerated(impl, tally, case)


@pytest.mark.parametrize("group", list(IDENTITY))
def test_identity_in_every_spelling(impl, tally, group):
    """Pairs of statements that are one node or two (SPEC.md, "Hash consing"), each with the
    gradient against both (which tells them apart: the loss weighs them 0.7 and -1.3),
    compared as the gradient check compares: bit for bit, or against the true derivative for
    an implementation that does not claim bit-exact gradients (the weights' sum then differs
    from either weight by far more than any bound)."""
    case = IDENTITY[group]
    tally.case(features_of(case.source))
    running.check_enumerated(impl, tally, case)


@pytest.mark.parametrize("name", sorted(REJECTIONS))
def test_every_rejection_in_every_disguise(impl, tally, name):
    """Each rejection rule in each way the generators disguise it, and each near miss, as
    its simplest program over a scalar and over a vector: rejected for that rule, or
    accepted and run, compared as the rejection check compares (SPEC.md, "When gradient is
    rejected")."""
    case = REJECTIONS[name]
    tally.case(features_of(case.source))
    running.check_enumerated(impl, tally, case)
