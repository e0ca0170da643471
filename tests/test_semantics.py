"""i32, bool and cast semantics against independent implementations (numpy int32 where it
follows C, plain Python where it does not), on random values. SPEC.md, "Values and arithmetic"."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance import reference
from gradient_conformance.reference import exact

i32s = st.one_of(st.integers(-(2**31), 2**31 - 1),
                 st.sampled_from([-(2**31), -(2**31) + 1, -1, 0, 1, 2**31 - 1, 31, 32, 33]))


def _run_binary(op: str, a: int, b: int) -> int:
    text = ("%a = buffer slot=0 dtype=i32 shape=[]\n%b = buffer slot=1 dtype=i32 shape=[]\n"
            "%o = buffer slot=2 dtype=i32 shape=[]\n%x = load %a\n%y = load %b\n"
            f"%z = {op} %x %y\nstore %o %z\n")
    out = reference.build(text)({0: np.int32(a).reshape(()), 1: np.int32(b).reshape(()),
                                 2: np.zeros((), np.int32)})
    return int(out[2])


def _c_div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = int(a / b) if abs(a) < 2**52 else (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)
    return ((q + 2**31) % 2**32) - 2**31


@given(i32s, i32s)
def test_add_mul_wrap_like_numpy_int32(a, b):
    with np.errstate(over="ignore"):
        assert _run_binary("add", a, b) == int(np.int32(a) + np.int32(b))
        assert _run_binary("mul", a, b) == int(np.int32(a) * np.int32(b))


@given(i32s, i32s)
def test_idiv_and_mod_follow_c(a, b):
    q = _run_binary("idiv", a, b)
    r = _run_binary("mod", a, b)
    assert q == _c_div(a, b)
    if b != 0:
        assert (q * b + r - a) % 2**32 == 0  # a == q*b + r in wrapping arithmetic
        assert r == 0 or (r < 0) == (a < 0)  # the remainder has the dividend's sign
        assert abs(r) < abs(b)
    else:
        assert r == 0


@given(i32s, i32s)
def test_shifts_take_the_count_mod_32(a, b):
    with np.errstate(over="ignore"):
        assert _run_binary("shl", a, b) == int(np.left_shift(np.int32(a), np.int32(b & 31)))
        assert _run_binary("shr", a, b) == int(np.right_shift(np.int32(a), np.int32(b & 31)))


@given(i32s, i32s)
def test_bitwise_and_compare(a, b):
    assert _run_binary("and", a, b) == a & b
    assert _run_binary("or", a, b) == a | b
    assert _run_binary("xor", a, b) == a ^ b


@given(st.integers(0, 2**32 - 1))
def test_f32_to_i32_truncates_or_gives_int_min(bits):
    value = exact.decode(bits)
    if math.isnan(value) or math.isinf(value) or not -(2**31) <= math.trunc(value) < 2**31:
        want = -(2**31)
    else:
        want = math.trunc(value)
    assert exact.f32_to_i32(bits) == want


@given(i32s)
def test_i32_to_f32_rounds_to_nearest_even(a):
    assert exact.decode(exact.i32_to_f32(a)) == float(np.float32(np.float64(a)))  # 2^31 fits
    # binary64 holds every i32 exactly, so one rounding to f32 is the correct one.


@given(st.integers(0, 2**32 - 1))
def test_f32_to_bool_is_not_equal_to_zero(bits):
    value = exact.decode(bits)
    assert exact.f32_to_bool(bits) == (math.isnan(value) or value != 0)
