"""The bundled fast implementation (implementations/fast.py) against the reference, on
generated cases: bit for bit where no transcendental op is involved, and rejecting exactly
what the reference rejects. It was written apart from the reference, so every disagreement
found here is a bug in one of the two."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradient_conformance import reference
from gradient_conformance.generators import (
    differentiable_programs,
    exact_programs,
    invalid_gradients,
    near_misses,
    order_sensitive_gradients,
)
from gradient_conformance.implementations import fast
from gradient_conformance.reference import cases, exact

checked = settings(max_examples=150, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TRANSCENDENTAL = {"exp2", "log2", "sin"}


def _both(case):
    want = reference.build(case.source)({k: v.copy() for k, v in case.buffers.items()})
    got = fast.build(case.source)({k: v.copy() for k, v in case.buffers.items()})
    return want, got


def _same(case) -> None:
    want, got = _both(case)
    assert set(want) == set(got)
    for slot in want:
        assert cases.same_bits(want[slot], np.asarray(got[slot])), (
            f"slot {slot}: reference {want[slot].tolist()}, fast {np.asarray(got[slot]).tolist()}"
            f"\n{case.source}")


@checked
@given(exact_programs())
def test_exact_programs_agree_bit_for_bit(case):
    _same(case)


@checked
@given(differentiable_programs(exclude=TRANSCENDENTAL))
def test_gradients_agree_bit_for_bit(case):
    _same(case)


@checked
@given(order_sensitive_gradients())
def test_order_sensitive_gradients_agree(case):
    _same(case)


@checked
@given(near_misses())
def test_near_misses_are_accepted_alike(case):
    _same(case)


@checked
@given(invalid_gradients())
def test_invalid_gradients_are_rejected(case):
    with pytest.raises(fast.Invalid):
        fast.build(case.source)


@pytest.mark.parametrize("op", sorted(TRANSCENDENTAL))
@checked
@given(values=st.lists(st.floats(width=32), min_size=1, max_size=16))
def test_transcendentals_are_within_the_declared_ulps(op, values):
    source = (f"%a = buffer slot=0 dtype=f32 shape=[{len(values)}]\n%x = load %a\n"
              f"%y = {op} %x\nstore %a %y\n")
    buffers = {0: np.array(values, np.float32)}
    want = reference.build(source)({0: buffers[0].copy()})[0].view(np.uint32)
    got = fast.build(source)({0: buffers[0].copy()})[0].view(np.uint32)
    for w, g in zip(want.tolist(), got.tolist(), strict=True):
        assert exact.same_f32(w, g) or exact.ulp_distance(w, g) <= fast.CAPABILITIES["ulp"][op], (
            op, values, hex(w), hex(g))


def test_capabilities_declare_the_transcendental_ulps():
    assert fast.CAPABILITIES["ulp"] == {"exp2": 1, "log2": 1, "sin": 1}
