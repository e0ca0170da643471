"""The same programs read over the reals, and over dual numbers: the oracle's cross-checks.

docs/oracle.md, "How the oracle is checked". `Real` evaluates every f32 op as the real function at a
high precision (mpmath, in a private context: no global state), reading the f32 constants of
the rules, 0.6931472 and 1.5707964, as ln 2 and pi/2. `Dual` does the same with a tangent
beside each value: forward mode. Both plug into interp.Interpreter in place of the exact f32
domain; i32 and bool stay exact.

Each domain records how close the run came to a kink (a max tie, a comparison flipping, a
cast to i32 crossing an integer, recip/log2/sqrt at zero, exp2 at
f32 overflow): `margin` is the smallest such
distance, so a caller can keep finite differences away from them. A max or comparison of a
real with itself (the same number, not an equal one: reduce max's rule compares each
element with the max it picked, a max over an expand meets copies of one value) is no kink:
it stays what it is in a neighbourhood, and the kinks it could meet there are the reduce's
own, measured where it folds.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from mpmath.ctx_mp import MPContext

from . import exact
from .rules import HALF_PI, LN2

_LN2_BITS, _HALF_PI_BITS = exact.f32_from_text(LN2), exact.f32_from_text(HALF_PI)


@functools.cache
def _context(digits: int) -> MPContext:
    """An mpmath context at `digits` decimal digits. Making one costs about 10 ms, and the
    generators make a Real for every case they draw, so there is one per precision; none is
    ever changed after it is made (nothing here sets `dps` again), so none carries state
    from one use to the next."""
    context = MPContext()
    context.dps = digits
    return context


class Real:
    """Real numbers at `digits` decimal digits."""

    name = "real"

    def __init__(self, digits: int = 60):
        self.mp = _context(digits)
        self.margin = math.inf

    # values in and out
    def literal(self, bits: int):
        if bits == _LN2_BITS:
            return self.mp.ln2
        if bits == _HALF_PI_BITS:
            return self.mp.pi / 2
        return self.from_bits(bits)

    def from_bits(self, bits: int):
        return self.mp.mpf(exact.decode(bits)) if not exact.is_nan(bits) else self.mp.nan

    def to_bits(self, value) -> int:
        if self.mp.isnan(value):
            return exact.QUIET_NAN
        if self.mp.isinf(value):
            return exact.POS_INF if value > 0 else exact.NEG_INF
        if value == 0:
            return exact.POS_ZERO
        sign, mantissa, exponent, _ = self.mp.mpf(value)._mpf_
        return exact.f32_from_dyadic((-1) ** sign * int(mantissa), int(exponent))

    def constant(self, value):
        return value

    def near(self, distance) -> None:
        self.margin = min(self.margin, float(abs(distance)))

    def compared(self, a, b) -> None:
        """a and b meet at a max or a comparison: a kink at a == b, unless b is a itself."""
        if a is not b:
            self.near(a - b)

    # the f32 ops, as real functions
    def add(self, a, b):
        return a + b

    def mul(self, a, b):
        return a * b

    def max(self, a, b):
        self.compared(a, b)
        return a if a >= b else b

    def recip(self, a):
        self.near(a)
        return 1 / a if a != 0 else self.mp.inf

    def sqrt(self, a):
        self.near(max(a, 0))  # outside the domain counts as on the kink
        return self.mp.sqrt(a) if a >= 0 else self.mp.nan

    def exp2(self, a):
        self.near(min(128 - a, 1e9))  # the f32 program overflows from 2^128 on
        return self.mp.power(2, a)

    def log2(self, a):
        self.near(max(a, 0))
        return self.mp.log(a, 2) if a > 0 else (self.mp.nan if a < 0 else -self.mp.inf)

    def sin(self, a):
        return self.mp.sin(a)

    def lt(self, a, b) -> bool:
        self.compared(a, b)
        return bool(a < b)

    def ne(self, a, b) -> bool:
        self.compared(a, b)
        return bool(a != b)

    def to_i32(self, a) -> int:
        if self.mp.isnan(a) or self.mp.isinf(a):
            return exact.I32_MIN
        self.near(a - self.mp.nint(a))
        t = int(self.mp.floor(a)) if a >= 0 else -int(self.mp.floor(-a))
        return t if exact.I32_MIN <= t <= exact.I32_MAX else exact.I32_MIN

    def from_i32(self, a: int):
        return self.mp.mpf(a)

    def to_bool(self, a) -> bool:
        self.near(a)
        return bool(a != 0)

    def from_bool(self, a: bool):
        return self.mp.mpf(1 if a else 0)


@dataclass(frozen=True, slots=True)
class Pair:
    """A dual number. (A class, not a tuple: numpy would unpack a tuple into an array.)"""

    value: object
    tangent: object


class Dual:
    """Forward mode: each f32 is a Pair (value, tangent) of reals."""

    name = "dual"

    def __init__(self, digits: int = 60):
        self.real = Real(digits)
        self.mp = self.real.mp

    @property
    def margin(self) -> float:
        return self.real.margin

    def literal(self, bits):
        return Pair(self.real.literal(bits), self.mp.zero)

    def from_bits(self, bits):
        return Pair(self.real.from_bits(bits), self.mp.zero)

    def to_bits(self, value) -> int:
        return self.real.to_bits(value.value)

    def constant(self, value):
        return Pair(value.value, self.mp.zero)  # detach: the value, with no tangent

    def add(self, a, b):
        return Pair(a.value + b.value, a.tangent + b.tangent)

    def mul(self, a, b):
        return Pair(a.value * b.value, a.value * b.tangent + a.tangent * b.value)

    def max(self, a, b):
        self.real.compared(a.value, b.value)
        return a if a.value >= b.value else b

    def recip(self, a):
        u = self.real.recip(a.value)
        return Pair(u, -u * u * a.tangent)

    def sqrt(self, a):
        u = self.real.sqrt(a.value)
        return Pair(u, a.tangent / (2 * u))

    def exp2(self, a):
        u = self.real.exp2(a.value)
        return Pair(u, u * self.mp.ln2 * a.tangent)

    def log2(self, a):
        return Pair(self.real.log2(a.value), a.tangent / (a.value * self.mp.ln2))

    def sin(self, a):
        return Pair(self.mp.sin(a.value), self.mp.cos(a.value) * a.tangent)

    def lt(self, a, b) -> bool:
        return self.real.lt(a.value, b.value)

    def ne(self, a, b) -> bool:
        return self.real.ne(a.value, b.value)

    def to_i32(self, a) -> int:
        return self.real.to_i32(a.value)

    def from_i32(self, a):
        return Pair(self.mp.mpf(a), self.mp.zero)

    def to_bool(self, a) -> bool:
        return self.real.to_bool(a.value)

    def from_bool(self, a):
        return Pair(self.real.from_bool(a), self.mp.zero)
