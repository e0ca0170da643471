"""Exact arithmetic: every f32, i32 and bool operation of the IR, and nothing else.

SPEC.md, "Values and arithmetic". This is the only module that computes a number. Every other
part of the reference asks it.

An f32 value travels as its raw 32-bit pattern (a Python int in [0, 2**32)), so that data
movement (load, store, where, expand, bitcast) keeps every bit, NaN payloads included. An
arithmetic op decodes its operands to Python floats (exact: binary32 is a subset of binary64),
computes the correctly rounded result, and encodes it. An i32 is a Python int in
[-2**31, 2**31); a bool is a Python bool.

Correct rounding has two backends with one interface, and the tests prove that they agree
(tests/test_rounding.py):
- `Mpfr`: MPFR through gmpy2 in the binary32 format (precision 24, emin -148, emax 128,
  subnormalize). The reference uses it whenever gmpy2 is installed.
- `Rational`: exact fractions for add, mul, recip, sqrt, literals and casts, rounded to binary32
  by hand (ties to even, subnormals, overflow); exp2, log2 and sin evaluated by mpmath at 300
  and 400 bits, which must round alike (Ziv's test). It needs no gmpy2, so the reference also
  runs under a Python that has only numpy and mpmath.
"""

from __future__ import annotations

import math
import os
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
from mpmath.ctx_mp import MPContext

# An implementation's process is started with ROUNDING=rational (docs/isolation.md, "Isolation"):
# gmpy2
# loads GMP, whose handlers turn a system's integer-division trap (SIGFPE) into an abort
# saying "gmp: overflow in mpz type", so a parse there must not load it.
ROUNDING = "GRADIENT_CONFORMANCE_ROUNDING"
try:
    if os.environ.get(ROUNDING) == "rational":
        raise ImportError(ROUNDING)
    import gmpy2
except ImportError:  # the Rational backend serves; see the module docstring
    gmpy2 = None

QUIET_NAN = 0x7FC00000  # the NaN every arithmetic op of the reference returns
POS_ZERO, NEG_ZERO = 0x00000000, 0x80000000
POS_INF, NEG_INF = 0x7F800000, 0xFF800000
ONE = 0x3F800000
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


# --- encoding -----------------------------------------------------------------------------


def decode(bits: int) -> float:
    """The f32 with these bits as a Python float (exact; a NaN loses its payload).

    In integers and exact scalings, never through the CPU's f32 conversions: a process whose
    floating-point environment reads subnormals as zero (DAZ, as a kernel language may set it
    for its whole process) decodes as any other (docs/isolation.md, "Isolation"). Every f32
    is a normal double, so `ldexp` scales it exactly whatever that environment."""
    sign = -1.0 if bits & 0x80000000 else 1.0
    exponent, fraction = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if exponent == 0xFF:
        return math.nan if fraction else sign * math.inf
    if exponent == 0:
        return sign * math.ldexp(float(fraction), -149)
    return sign * math.ldexp(float(fraction | 0x800000), exponent - 150)


def encode(value: float) -> int:
    """The bits of a Python float that is exactly an f32 value (or a NaN, which is quieted).

    In integers, as `decode`: the CPU's conversion to f32 flushes a subnormal under FTZ."""
    if math.isnan(value):
        return QUIET_NAN
    sign = 0x80000000 if math.copysign(1.0, value) < 0 else 0
    if math.isinf(value):
        return sign | POS_INF
    numerator, denominator = abs(value).as_integer_ratio()  # denominator: 2**shift
    shift = denominator.bit_length() - 1
    assert shift <= 149, f"{value!r} is not an f32 value"
    units = numerator << (149 - shift)  # the value in units of 2**-149, the least subnormal
    if units < 1 << 23:
        return sign | units  # zero or subnormal: the exponent field 0
    biased = units.bit_length() - 23  # 1 for units in [2**23, 2**24)
    significand = units >> (biased - 1)
    assert significand << (biased - 1) == units and biased < 0xFF, \
        f"{value!r} is not an f32 value"
    return sign | biased << 23 | (significand - (1 << 23))


def is_nan(bits: int) -> bool:
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0


def same_f32(a: int, b: int) -> bool:
    """Bit equality, except that every NaN equals every other NaN (SPEC.md, "NaN")."""
    return a == b or (is_nan(a) and is_nan(b))


def to_signed(bits: int) -> int:
    """The i32 whose two's complement pattern is these 32 bits."""
    bits &= 0xFFFFFFFF
    return bits - (1 << 32) if bits & 0x80000000 else bits


def to_unsigned(value: int) -> int:
    return value & 0xFFFFFFFF


def ulp_distance(a: int, b: int) -> int:
    """How many f32 values lie between a and b, counting -0.0 and +0.0 as one point."""
    def ordinal(bits: int) -> int:
        return -(bits & 0x7FFFFFFF) if bits & 0x80000000 else bits

    return abs(ordinal(a) - ordinal(b))


def to_numpy_f32(bits: list[int] | np.ndarray) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


# --- literals -------------------------------------------------------------------------------

_DECIMAL = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
# Beyond these decimal exponents a literal is surely inf or zero; bounding them first keeps a
# literal like 1e999999999999 from costing anything.
_MAX_DECIMAL_EXPONENT, _MIN_DECIMAL_EXPONENT = 40, -47


def f32_from_text(text: str) -> int:
    """The f32 literal `text` (SPEC.md, "Text form"): the decimal rounded once to the nearest
    f32, ties to even, with subnormals and overflow to infinity; or inf, -inf, nan."""
    special = {"inf": POS_INF, "-inf": NEG_INF, "nan": QUIET_NAN}
    if text in special:
        return special[text]
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"not a decimal number: {text!r}")
    negative = text.startswith("-")
    mantissa, _, exponent = text.lstrip("-").lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    first = len(digits) - len(digits.lstrip("0"))  # index of the first nonzero digit
    if first == len(digits):
        return NEG_ZERO if negative else POS_ZERO
    # An exponent of more than 12 digits is beyond the f32 range, whatever the mantissa (no
    # line holds the 10**11 digits that could make up for it), and may be beyond what int()
    # reads from a string: infinity, or zero.
    if len(exponent.lstrip("+-").lstrip("0")) > 12:
        if exponent.startswith("-"):
            return NEG_ZERO if negative else POS_ZERO
        return NEG_INF if negative else POS_INF
    # The value lies in [10**magnitude, 10**(magnitude + 1)).
    magnitude = len(whole) - first - 1 + int(exponent or "0")
    if magnitude > _MAX_DECIMAL_EXPONENT:
        return NEG_INF if negative else POS_INF
    if magnitude < _MIN_DECIMAL_EXPONENT:
        return NEG_ZERO if negative else POS_ZERO
    return BACKEND.from_decimal(text)


def f32_to_text(bits: int) -> str:
    """The shortest decimal that reads back as these bits, always with a '.' or an exponent,
    so that it is an f32 literal (numpy's float32 repr is shortest-round-trip)."""
    if is_nan(bits):
        return "nan"
    text = str(np.array([bits], dtype=np.uint32).view(np.float32)[0])
    if not any(c in text for c in ".en"):
        text += ".0"
    return text


def i32_from_text(text: str) -> int:
    """An i32 literal: a plain integer in [-2**31, 2**31)."""
    if not re.fullmatch(r"-?\d+", text):
        raise ValueError(f"not an integer: {text!r}")
    if len(text.lstrip("-").lstrip("0")) > 10:
        raise OverflowError(text)
    value = int(text)
    if not I32_MIN <= value <= I32_MAX:
        raise OverflowError(text)
    return value


def f32_from_dyadic(mantissa: int, exponent: int) -> int:
    """mantissa * 2**exponent, an exact real, rounded once to the nearest f32 (ties to even,
    subnormals, overflow to infinity): how a real-number result becomes an f32."""
    return BACKEND.from_dyadic(mantissa, exponent)


# --- f32 arithmetic: IEEE binary32, correctly rounded -----------------------------------------


def f32_add(a: int, b: int) -> int:
    return BACKEND.add(a, b)


def f32_mul(a: int, b: int) -> int:
    return BACKEND.mul(a, b)


def f32_recip(a: int) -> int:
    return BACKEND.recip(a)


def f32_sqrt(a: int) -> int:
    return BACKEND.sqrt(a)


def f32_exp2(a: int) -> int:
    return BACKEND.exp2(a)


def f32_log2(a: int) -> int:
    return BACKEND.log2(a)


def f32_sin(a: int) -> int:
    return BACKEND.sin(a)


# Not ops of the IR: the suite's variants of the rules write some shares with them
# (conformance/diagnosis/variants.py), as implementations do.


def f32_div(a: int, b: int) -> int:
    """a / b, correctly rounded (IEEE 754 division)."""
    return BACKEND.div(a, b)


def f32_cos(a: int) -> int:
    return BACKEND.cos(a)


def f32_from_float(value: float) -> int:
    """A Python float (binary64) rounded once to the nearest f32, NaN to the quiet NaN: how
    a result computed in binary64 becomes an f32."""
    if math.isnan(value):
        return QUIET_NAN
    if math.isinf(value):
        return encode(value)
    mantissa, denominator = value.as_integer_ratio()  # denominator: a power of two
    bits = f32_from_dyadic(mantissa, -(denominator.bit_length() - 1))
    # -0.0 has the ratio 0/1: its sign is the one thing the ratio loses.
    return bits | (0x80000000 if math.copysign(1.0, value) < 0 else 0)


def is_subnormal(bits: int) -> bool:
    return bits & 0x7F800000 == 0 and bits & 0x007FFFFF != 0


def flush(bits: int) -> int:
    """A subnormal as the zero of its sign (flush to zero); any other value unchanged."""
    return bits & 0x80000000 if is_subnormal(bits) else bits


def f32_fold(values: list[int]) -> int:
    """The left fold of f32 adds, each step rounded: ((v0 + v1) + v2) + ...: how the spec
    sums a node's shares and reduces."""
    total = values[0]
    for value in values[1:]:
        total = f32_add(total, value)
    return total


def f32_max(a: int, b: int) -> int:
    """IEEE 754-2019 maximum: NaN if either is NaN, and +0.0 above -0.0."""
    if is_nan(a) or is_nan(b):
        return QUIET_NAN
    x, y = decode(a), decode(b)
    if x == y:
        return a if not (a & 0x80000000) else b  # +0.0 wins a tie of zeros; else a == b
    return a if x > y else b


def f32_lt(a: int, b: int) -> bool:
    return decode(a) < decode(b)  # Python follows IEEE: false with a NaN, -0.0 == +0.0


def f32_ne(a: int, b: int) -> bool:
    return decode(a) != decode(b)  # true with a NaN


# --- casts ----------------------------------------------------------------------------------


def f32_to_i32(a: int) -> int:
    """Truncate toward zero; NaN and values out of the i32 range give -2**31."""
    x = decode(a)
    if math.isnan(x) or math.isinf(x):
        return I32_MIN
    t = math.trunc(x)
    return t if I32_MIN <= t <= I32_MAX else I32_MIN


def i32_to_f32(a: int) -> int:
    return BACKEND.from_dyadic(a, 0)


def f32_to_bool(a: int) -> bool:
    return is_nan(a) or (a & 0x7FFFFFFF) != 0


def bool_to_f32(a: bool) -> int:
    return ONE if a else POS_ZERO


# --- i32 arithmetic: two's complement, C semantics --------------------------------------------


def wrap(value: int) -> int:
    return to_signed(value & 0xFFFFFFFF)


def i32_add(a: int, b: int) -> int:
    return wrap(a + b)


def i32_mul(a: int, b: int) -> int:
    return wrap(a * b)


def i32_max(a: int, b: int) -> int:
    return max(a, b)


def i32_idiv(a: int, b: int) -> int:
    """C division: truncate toward zero; by zero gives 0; -2**31 / -1 wraps to -2**31."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap(q if (a < 0) == (b < 0) else -q)


def i32_mod(a: int, b: int) -> int:
    """C remainder: the sign of the dividend; by zero gives 0; a == idiv(a, b) * b + mod(a, b)."""
    if b == 0:
        return 0
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def i32_shl(a: int, b: int) -> int:
    return wrap(a << (b & 31))


def i32_shr(a: int, b: int) -> int:
    return a >> (b & 31)  # Python's >> on ints is arithmetic


def int_and(a, b):
    return a & b


def int_or(a, b):
    return a | b


def int_xor(a, b):
    return a ^ b


def int_lt(a, b) -> bool:
    return a < b


def int_ne(a, b) -> bool:
    return a != b


# --- the two backends of correct rounding -------------------------------------------------------


class Mpfr:
    """MPFR in the binary32 format: one correct rounding per operation."""

    name = "mpfr"

    def __init__(self):
        self.ieee32 = gmpy2.ieee(32)  # precision 24, emin -148, emax 128, subnormalize

    def _rounded(self, function, *operands: int) -> int:
        with gmpy2.context(self.ieee32):
            return encode(float(function(*(gmpy2.mpfr(decode(b)) for b in operands))))

    def add(self, a, b):
        return self._rounded(gmpy2.add, a, b)

    def mul(self, a, b):
        return self._rounded(gmpy2.mul, a, b)

    def recip(self, a):
        # MPFR gives 1/-0 = -inf and 1/+0 = +inf, as IEEE 754 division does.
        return self._rounded(lambda x: gmpy2.div(gmpy2.mpfr(1), x), a)

    def sqrt(self, a):
        return self._rounded(gmpy2.sqrt, a)

    def exp2(self, a):
        return self._rounded(gmpy2.exp2, a)

    def log2(self, a):
        return self._rounded(gmpy2.log2, a)

    def sin(self, a):
        return self._rounded(gmpy2.sin, a)

    def div(self, a, b):
        return self._rounded(gmpy2.div, a, b)

    def cos(self, a):
        return self._rounded(gmpy2.cos, a)

    def from_decimal(self, text: str) -> int:
        with gmpy2.context(self.ieee32):
            return encode(float(gmpy2.mpfr(text)))

    def from_dyadic(self, mantissa: int, exponent: int) -> int:
        with gmpy2.context(precision=max(abs(mantissa).bit_length(), 1) + 2, emin=-(10**9),
                           emax=10**9):
            value = gmpy2.mul_2exp(gmpy2.mpfr(mantissa), exponent)  # exact at this precision
        with gmpy2.context(self.ieee32):
            return encode(float(gmpy2.mpfr(value)))


class Rational:
    """Correct rounding without MPFR: exact rationals rounded to binary32 by hand, and mpmath
    for the transcendental functions (Ziv: two precisions must round alike)."""

    name = "rational"

    def __init__(self):
        self.contexts = []
        for bits in (300, 400):
            context = MPContext()  # private: no global mpmath state
            context.prec = bits
            self.contexts.append(context)

    @staticmethod
    def round(q: Fraction, negative_zero: bool = False) -> int:
        """The binary32 nearest to the rational q, ties to even, with subnormals and overflow
        to infinity. A zero result takes q's sign (or `negative_zero` when q is exactly 0)."""
        if q == 0:
            return NEG_ZERO if negative_zero else POS_ZERO
        sign = 0x80000000 if q < 0 else 0
        a = abs(q)
        e = a.numerator.bit_length() - a.denominator.bit_length()
        if Fraction(2) ** e > a:
            e -= 1  # now 2**e <= a < 2**(e+1)
        quantum = Fraction(2) ** (max(e, -126) - 23)  # below 2**-126 the quantum stays 2**-149
        n, rest = divmod(a, quantum)
        n = int(n)
        if rest * 2 > quantum or (rest * 2 == quantum and n % 2 == 1):
            n += 1
        if n * quantum >= 2**128:
            return sign | POS_INF
        return sign | encode(float(n * quantum))

    def _transcendental(self, name: str, function, x: float) -> int:
        """function(context, x) at 300 and 400 bits, each rounded to binary32: they agree
        unless the value is within 2**-290 of a rounding boundary, which for f32 arguments
        of exp2, log2 and sin does not happen (and would raise, never round wrongly)."""
        results = []
        for context in self.contexts:
            sign, mantissa, exponent, _ = context.mpf(function(context, context.mpf(x)))._mpf_
            results.append(self.round((-1) ** sign * Fraction(int(mantissa)) *
                                      Fraction(2) ** int(exponent)))
        if results[0] != results[1]:
            raise ArithmeticError(f"{name}({x!r}) is too close to a rounding boundary to decide")
        return results[0]

    def add(self, a, b):
        x, y = decode(a), decode(b)
        if math.isnan(x) or math.isnan(y):
            return QUIET_NAN
        if math.isinf(x) or math.isinf(y):
            if math.isinf(x) and math.isinf(y) and x != y:
                return QUIET_NAN
            return encode(x if math.isinf(x) else y)
        both_negative = a & b & 0x80000000 and x == 0 and y == 0
        return self.round(Fraction(x) + Fraction(y), negative_zero=bool(both_negative))

    def mul(self, a, b):
        x, y = decode(a), decode(b)
        if math.isnan(x) or math.isnan(y):
            return QUIET_NAN
        negative = bool((a ^ b) & 0x80000000)
        if math.isinf(x) or math.isinf(y):
            return QUIET_NAN if x == 0 or y == 0 else (NEG_INF if negative else POS_INF)
        return self.round(Fraction(x) * Fraction(y), negative_zero=negative)

    def recip(self, a):
        x = decode(a)
        if math.isnan(x):
            return QUIET_NAN
        if x == 0:
            return NEG_INF if a & 0x80000000 else POS_INF
        if math.isinf(x):
            return NEG_ZERO if x < 0 else POS_ZERO
        return self.round(1 / Fraction(x))

    def sqrt(self, a):
        x = decode(a)
        if math.isnan(x) or x < 0:
            return QUIET_NAN
        if x == 0 or math.isinf(x):
            return a  # sqrt(+-0) = +-0, sqrt(inf) = inf
        # x * 4**100 is an integer n (x >= 2**-149), and sqrt(x) = sqrt(n) / 2**100. If n is
        # a square the root is exact. Otherwise it lies strictly between r and r + 1 (in
        # units of 2**-100, r = isqrt(n)); every rounding boundary of an f32 result is a
        # multiple of 2**-99, so none lies inside, and the midpoint rounds as the root does.
        n = int(Fraction(x) * 4**100)
        r = math.isqrt(n)
        value = Fraction(r, 2**100) if r * r == n else Fraction(2 * r + 1, 2**101)
        return self.round(value)

    def exp2(self, a):
        x = decode(a)
        if math.isnan(x):
            return QUIET_NAN
        if math.isinf(x):
            return POS_ZERO if x < 0 else POS_INF
        if x >= 128:
            return POS_INF
        if x < -150:
            return POS_ZERO  # below half the smallest subnormal
        if x == int(x):
            return self.round(Fraction(2) ** int(x))  # exact: ties are decided exactly
        return self._transcendental("exp2", lambda c, v: c.power(2, v), x)

    def log2(self, a):
        x = decode(a)
        if math.isnan(x) or x < 0:
            return QUIET_NAN
        if x == 0:
            return NEG_INF
        if math.isinf(x):
            return POS_INF
        mantissa, exponent = math.frexp(x)
        if mantissa == 0.5:
            return self.round(Fraction(exponent - 1))  # a power of two: an exact integer
        return self._transcendental("log2", lambda c, v: c.log(v, 2), x)

    def sin(self, a):
        x = decode(a)
        if math.isnan(x) or math.isinf(x):
            return QUIET_NAN
        if x == 0:
            return a  # sin(+-0) = +-0
        return self._transcendental("sin", lambda c, v: c.sin(v), x)

    def div(self, a, b):
        x, y = decode(a), decode(b)
        negative = bool((a ^ b) & 0x80000000)
        if math.isnan(x) or math.isnan(y) or (x == 0 and y == 0) or \
                (math.isinf(x) and math.isinf(y)):
            return QUIET_NAN
        if math.isinf(x) or y == 0:
            return NEG_INF if negative else POS_INF
        if math.isinf(y) or x == 0:
            return NEG_ZERO if negative else POS_ZERO
        return self.round(Fraction(x) / Fraction(y), negative_zero=negative)

    def cos(self, a):
        x = decode(a)
        if math.isnan(x) or math.isinf(x):
            return QUIET_NAN
        if x == 0:
            return ONE
        return self._transcendental("cos", lambda c, v: c.cos(v), x)

    def from_decimal(self, text: str) -> int:
        # Through Decimal, which reads any number of digits (Fraction's int() does not).
        return self.round(Fraction(Decimal(text)), negative_zero=text.startswith("-"))

    def from_dyadic(self, mantissa: int, exponent: int) -> int:
        return self.round(Fraction(mantissa) * Fraction(2) ** exponent)


BACKENDS: dict[str, type[Rational] | type[Mpfr]] = {"rational": Rational}
if gmpy2 is not None:
    BACKENDS["mpfr"] = Mpfr
BACKEND = BACKENDS["mpfr" if gmpy2 is not None else "rational"]()
