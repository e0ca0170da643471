"""Exact arithmetic: every f32, i32 and bool operation of the IR, and nothing else.

SPEC.md, "Values and arithmetic". This is the only module that computes a number. Every other
part of the reference asks it.

An f32 value travels as its raw 32-bit pattern (a Python int in [0, 2**32)), so that data
movement (load, store, where, expand, bitcast) keeps every bit, NaN payloads included. An
arithmetic op decodes its operands to Python floats (exact: binary32 is a subset of binary64),
computes in MPFR with the binary32 format (precision 24, emin -148, emax 128, subnormals), and
encodes the correctly rounded result. An i32 is a Python int in [-2**31, 2**31); a bool is a
Python bool.
"""

from __future__ import annotations

import math
import re
import struct

import gmpy2
import numpy as np

# MPFR with exactly the binary32 format: precision 24, emin -148, emax 128, subnormalize.
_IEEE32 = gmpy2.ieee(32)

QUIET_NAN = 0x7FC00000  # the NaN every arithmetic op of the reference returns
POS_ZERO, NEG_ZERO = 0x00000000, 0x80000000
POS_INF, NEG_INF = 0x7F800000, 0xFF800000
ONE = 0x3F800000
I32_MIN, I32_MAX = -(2**31), 2**31 - 1

# The two constants of the gradient rules, each the nearest f32 to the real it stands for.
LN2_TEXT, HALF_PI_TEXT = "0.6931472", "1.5707964"


# --- encoding -----------------------------------------------------------------------------


def decode(bits: int) -> float:
    """The f32 with these bits as a Python float (exact; a NaN loses its payload)."""
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def encode(value: float) -> int:
    """The bits of a Python float that is exactly an f32 value (or a NaN, which is quieted)."""
    if math.isnan(value):
        return QUIET_NAN
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    assert decode(bits) == value, f"{value!r} is not an f32 value"
    return bits


def is_nan(bits: int) -> bool:
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0


def same_f32(a: int, b: int) -> bool:
    """Bit equality, except that every NaN equals every other NaN (SPEC.md, "Comparing")."""
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
    """The f32 literal `text` (SPEC.md, "Literals"): the decimal rounded once to the nearest
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
    # The value lies in [10**magnitude, 10**(magnitude + 1)).
    magnitude = len(whole) - first - 1 + int(exponent or "0")
    if magnitude > _MAX_DECIMAL_EXPONENT:
        return NEG_INF if negative else POS_INF
    if magnitude < _MIN_DECIMAL_EXPONENT:
        return NEG_ZERO if negative else POS_ZERO
    with gmpy2.context(_IEEE32):
        return encode(float(gmpy2.mpfr(text)))


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
    with gmpy2.context(precision=max(abs(mantissa).bit_length(), 1) + 2, emin=-(10**9),
                       emax=10**9):
        value = gmpy2.mul_2exp(gmpy2.mpfr(mantissa), exponent)  # exact at this precision
    with gmpy2.context(_IEEE32):
        return encode(float(gmpy2.mpfr(value)))


# --- f32 arithmetic: IEEE binary32, correctly rounded -----------------------------------------


def _rounded(function, *operands: int) -> int:
    """Apply an MPFR function to f32 operands in the binary32 context: one correct rounding."""
    with gmpy2.context(_IEEE32):
        result = function(*(gmpy2.mpfr(decode(b)) for b in operands))
        return encode(float(result))


def f32_add(a: int, b: int) -> int:
    return _rounded(gmpy2.add, a, b)


def f32_mul(a: int, b: int) -> int:
    return _rounded(gmpy2.mul, a, b)


def f32_recip(a: int) -> int:
    # MPFR gives 1/-0 = -inf and 1/+0 = +inf, as IEEE 754 division does.
    return _rounded(lambda x: gmpy2.div(gmpy2.mpfr(1), x), a)


def f32_sqrt(a: int) -> int:
    return _rounded(gmpy2.sqrt, a)


def f32_exp2(a: int) -> int:
    return _rounded(gmpy2.exp2, a)


def f32_log2(a: int) -> int:
    return _rounded(gmpy2.log2, a)


def f32_sin(a: int) -> int:
    return _rounded(gmpy2.sin, a)


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
    with gmpy2.context(_IEEE32):
        return encode(float(gmpy2.mpfr(a)))


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
