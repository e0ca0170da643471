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
    """One rule's enumerated program: bit for bit where the implementation claims bit-exact
    gradients (within its declared ulps where the rule's op is exp2, log2 or sin), else
    against the true derivative (running.compare_claims)."""
    case = CASES[name]
    tally.case({case.op})
    reading, want, got = running.run_both(impl, case.source, dict(case.buffers), tally=tally)
    ulps = impl.ulps(case.op) if case.op in TRANSCENDENTAL else 0
    running.compare_claims(impl, tally, reading, case.buffers, want, got, ulps=ulps,
                           description=case.description)
