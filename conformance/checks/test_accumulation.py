"""Accumulation order: shares are summed as a left fold in arrival order, and programs whose
f32 sum depends on the order tell. When an implementation gets other bits, the diagnosis
names the order it used, if the catalogue has it (program order, reversed arrival, reversed
program order, pairwise, creation order, ...). SPEC.md, "The walk"."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance import running
from gradient_conformance.generators import order_sensitive_gradients

RANK = 5  # where the suite runs these checks (plugin.rank): cheaper, more telling first


@given(data=st.data())
def test_shares_are_summed_in_arrival_order(impl, tally, data):
    """Programs whose gradient sums depend on the order: shares summed in arrival order, bit
    for bit."""
    if not impl.capabilities["bit_exact_gradients"]:
        pytest.skip("the order of a sum shows only in the bits, and the implementation does "
                    "not claim bit-exact gradients (CAPABILITIES)")
    case = data.draw(order_sensitive_gradients())
    running.supported(impl, case, tally)
    running.check_case(impl, tally, case)
