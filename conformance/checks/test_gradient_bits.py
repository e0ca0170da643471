"""Gradients bit for bit: the walk order, the left fold of shares in arrival order, and the
exact op form of every rule. SPEC.md, "gradient" and "The rules"."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance import running
from gradient_conformance.generators import differentiable_programs
from gradient_conformance.reference.ops import TRANSCENDENTAL

RANK = 4  # where the suite runs these checks (plugin.rank): cheaper, more telling first


@given(data=st.data())
def test_gradients_bit_for_bit(impl, tally, data):
    if not impl.capabilities.get("bit_exact_gradients", True):
        pytest.skip("does not claim bit-exact gradients (CAPABILITIES)")
    inexact = any(impl.ulps(op) for op in TRANSCENDENTAL)
    exclude = running.exclusions(impl, transcendental=inexact)
    case = data.draw(differentiable_programs(exclude=exclude))
    running.supported(impl, case, tally)
    running.check_case(impl, tally, case)
