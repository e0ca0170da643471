"""Every rule at every value class: bounded-exhaustive programs enumerated from the tables
(generators/enumerations.py), each element one combination of operand classes, operand kind
(loaded, a literal on either side, the same operand twice) and class of g, first and second
derivative. docs/generators.md, "Enumerations"; SPEC.md, "The rules"."""

from __future__ import annotations

import pytest

from gradient_conformance.conformance import running
from gradient_conformance.generators.enumerations import enumerated_cases
from gradient_conformance.reference.ops import TRANSCENDENTAL

RANK = 3  # where the suite runs these checks (plugin.rank): cheaper, more telling first
CASES = {case.name: case for case in enumerated_cases()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_at_every_value_class(impl, tally, name):
    """One rule's enumerated program, bit for bit, for an implementation that claims
    bit-exact gradients (within its declared ulps where the rule's op is exp2, log2 or sin),
    compared as a case file is (running.compare_claims)."""
    if not impl.capabilities.get("bit_exact_gradients", True):
        # At an infinity, a NaN or a signed zero the rules give exact values where no true
        # derivative exists to compare with: what these programs are about is bits.
        pytest.skip("does not claim bit-exact gradients (CAPABILITIES): the value classes "
                    "enumerated here have no true derivative to compare against")
    case = CASES[name]
    tally.case({case.op})
    reading, want, got = running.run_both(impl, case.source, dict(case.buffers), tally=tally)
    ulps = impl.ulps(case.op) if case.op in TRANSCENDENTAL else 0
    running.compare_claims(impl, tally, reading, case.buffers, want, got, ulps=ulps,
                           description=case.description)
