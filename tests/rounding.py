"""An independent rounding routine, to check exact.py against: exact rationals (fractions) and
mpmath at high precision, rounded to binary32 by hand. It shares no code with the reference.

IEEE 754 binary32: 24-bit significands, exponents -126..127, subnormals down to 2**-149,
round to nearest with ties to even, overflow to infinity at 2**128 - 2**103 and above.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import mpmath

NAN = 0x7FC00000
POS_INF, NEG_INF = 0x7F800000, 0xFF800000


def bits_of(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def value_of(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def is_nan(bits: int) -> bool:
    return (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF != 0


def round_fraction(q: Fraction, negative_zero: bool = False) -> int:
    """The binary32 nearest to the rational q, ties to even. A zero result takes q's sign
    (or `negative_zero` when q is exactly 0)."""
    if q == 0:
        return 0x80000000 if negative_zero else 0
    sign = 0x80000000 if q < 0 else 0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1  # now 2**e <= a < 2**(e+1)
    e = max(e, -126)  # below the normal range the quantum stays 2**-149
    quantum = Fraction(2) ** (e - 23)
    n, rest = divmod(a, quantum)
    n = int(n)
    if rest * 2 > quantum or (rest * 2 == quantum and n % 2 == 1):
        n += 1
    value = n * quantum
    if value >= 2**128:
        return sign | POS_INF
    return sign | bits_of(float(value))


def round_mpf(value, prec: int) -> int:
    """Round an mpmath real computed at `prec` bits; checked against a recomputation elsewhere."""
    if mpmath.isinf(value):
        return POS_INF if value > 0 else NEG_INF
    sign, man, exp, _ = mpmath.mpf(value)._mpf_
    return round_fraction((-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp))


def _ziv(function, *args: float) -> int:
    """Correct rounding of a transcendental: evaluate at 300 and 400 bits and insist that both
    round the same way (otherwise the case is too close to call, and we say so)."""
    results = []
    for prec in (300, 400):
        with mpmath.workprec(prec):
            results.append(round_mpf(function(*(mpmath.mpf(a) for a in args)), prec))
    assert results[0] == results[1], f"too close to a rounding boundary to decide: {args}"
    return results[0]


def add(a: int, b: int) -> int:
    x, y = value_of(a), value_of(b)
    if math.isnan(x) or math.isnan(y):
        return NAN
    if math.isinf(x) or math.isinf(y):
        if math.isinf(x) and math.isinf(y) and x != y:
            return NAN
        return bits_of(x if math.isinf(x) else y)
    exact = Fraction(x) + Fraction(y)
    both_negative_zero = x == 0 and y == 0 and math.copysign(1, x) < 0 and math.copysign(1, y) < 0
    return round_fraction(exact, negative_zero=both_negative_zero)


def mul(a: int, b: int) -> int:
    x, y = value_of(a), value_of(b)
    if math.isnan(x) or math.isnan(y):
        return NAN
    negative = (math.copysign(1, x) < 0) != (math.copysign(1, y) < 0)
    if math.isinf(x) or math.isinf(y):
        if x == 0 or y == 0:
            return NAN
        return NEG_INF if negative else POS_INF
    return round_fraction(Fraction(x) * Fraction(y), negative_zero=negative)


def recip(a: int) -> int:
    x = value_of(a)
    if math.isnan(x):
        return NAN
    if x == 0:
        return NEG_INF if math.copysign(1, x) < 0 else POS_INF
    if math.isinf(x):
        return 0x80000000 if x < 0 else 0
    return round_fraction(1 / Fraction(x))


def sqrt(a: int) -> int:
    x = value_of(a)
    if math.isnan(x) or x < 0:
        return NAN
    if x == 0 or math.isinf(x):
        return a  # sqrt(+-0) = +-0, sqrt(inf) = inf
    return _ziv(mpmath.sqrt, x)


def exp2(a: int) -> int:
    x = value_of(a)
    if math.isnan(x):
        return NAN
    if math.isinf(x):
        return 0 if x < 0 else POS_INF
    if x > 200:  # 2**200 is far past the overflow threshold; skip the huge evaluation
        return POS_INF
    if x < -200:
        return 0
    return _ziv(lambda v: mpmath.power(2, v), x)


def log2(a: int) -> int:
    x = value_of(a)
    if math.isnan(x) or x < 0:
        return NAN
    if x == 0:
        return NEG_INF
    if math.isinf(x):
        return POS_INF
    if x == 1:
        return 0
    return _ziv(lambda v: mpmath.log(v, 2), x)


def sin(a: int) -> int:
    x = value_of(a)
    if math.isnan(x) or math.isinf(x):
        return NAN
    if x == 0:
        return a  # sin(+-0) = +-0
    return _ziv(mpmath.sin, x)
