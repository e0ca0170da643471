"""Gradients bit for bit: the walk order, the left fold of shares in arrival order, and the
exact op form of every rule. SPEC.md, "gradient" and "The rules"."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance.checks.compare import (
    TRANSCENDENTAL,
    check,
    exclusions,
    supported,
)
from gradient_conformance.generators import differentiable_programs


@given(data=st.data())
def test_gradients_bit_for_bit(impl, data):
    if not impl.capabilities.get("bit_exact_gradients", True):
        pytest.skip("does not claim bit-exact gradients (CAPABILITIES)")
    inexact = any(impl.ulps(op) for op in TRANSCENDENTAL)
    case = data.draw(differentiable_programs(exclude=exclusions(impl, transcendental=inexact)))
    supported(impl, case)
    check(impl, case)
