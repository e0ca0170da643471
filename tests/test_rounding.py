"""Correct rounding, proven twice over. SPEC.md, "Values and arithmetic".

exact.py has two backends: MPFR through gmpy2, and `Rational`, a rounding routine written
here from exact fractions and mpmath at high precision (ties to even, subnormals, overflow by
hand). They share no arithmetic, and they must agree on every op the IR computes in f32: 10^3
random bit patterns per op in the first tier of tests and 10^5 in the second (make test-all).
Half the patterns are uniform over all 2^32 (so NaNs, infinities, subnormals and both zeros
all occur), half are drawn to stress rounding: operands of nearby magnitudes, subnormals,
values near overflow and underflow. Hard cases are checked against their definitions on both
backends.
"""

from __future__ import annotations

import random

import pytest

from gradient_conformance.reference import exact

needs_mpfr = pytest.mark.skipif("mpfr" not in exact.BACKENDS,
                                reason="gmpy2 is not installed: nothing to compare against")
MPFR = exact.BACKENDS["mpfr"]() if "mpfr" in exact.BACKENDS else None
RATIONAL = exact.Rational()
UNARY = ("recip", "sqrt", "exp2", "log2", "sin", "cos")  # cos and div: for the variants
BINARY = ("add", "mul", "div")
BACKENDS = [b for b in (MPFR, RATIONAL) if b is not None]

DEFAULT_COUNT, SLOW_COUNT = 1000, 100_000


def _pattern(rng: random.Random, op: str) -> int:
    """One operand: uniform bits, or a value shaped to stress this op's rounding."""
    if rng.random() < 0.5:
        return rng.getrandbits(32)
    sign = rng.getrandbits(1) << 31
    if op == "exp2":  # arguments whose results span subnormal .. overflow
        return exact.f32_from_text(repr(rng.uniform(-152, 129)))
    exponent = rng.choice([0, 1, 2, 126, 127, 128, 150, 230, 253, 254]
                          + [rng.randint(1, 254)] * 4)
    return sign | exponent << 23 | rng.getrandbits(23)


def _neighbour(rng: random.Random, a: int) -> int:
    """An operand near a in magnitude, so that add and mul round in interesting ways."""
    exponent = min(max(((a >> 23) & 0xFF) + rng.randint(-25, 25), 0), 254)
    return rng.getrandbits(1) << 31 | exponent << 23 | rng.getrandbits(23)


def _agree(name: str, got: int, want: int, *operands: int) -> None:
    assert exact.same_f32(got, want), (
        f"{name}({', '.join(f'0x{o:08x}' for o in operands)}): 0x{got:08x}, "
        f"expected 0x{want:08x}")


@needs_mpfr
@pytest.mark.parametrize("name", UNARY + BINARY)
@pytest.mark.parametrize("count", [DEFAULT_COUNT,
                                   pytest.param(SLOW_COUNT, marks=pytest.mark.slow)])
def test_the_backends_agree(name, count, figures):
    """10^3 random bit patterns per op in the first tier, 10^5 in the second."""
    ours, theirs = getattr(MPFR, name), getattr(RATIONAL, name)
    rng = random.Random(f"rounding-{name}")
    for _ in range(count):
        operands = [_pattern(rng, name)]
        if name in BINARY:
            a = operands[0]
            operands.append(_neighbour(rng, a) if rng.random() < 0.5 else _pattern(rng, name))
        _agree(name, ours(*operands), theirs(*operands), *operands)
    what = "bit patterns" if name in UNARY else "pairs of bit patterns"
    figures(f"rounding: {name}: MPFR and the rational routine agree on {count} {what}")


F = exact.f32_from_text
HARD_CASES = [
    # (op, operand text, expected result text): each from the definition of the op
    ("exp2", "-150.0", "0.0"),  # 2^-150 is half the smallest subnormal: a tie, to even (+0)
    ("exp2", "-149.0", "1e-45"),  # the smallest subnormal exactly
    ("exp2", "-149.5", "1e-45"),  # 2^-149.5 is above the tie at 2^-150
    ("exp2", "128.0", "inf"),  # 2^128 overflows
    ("exp2", "127.0", "1.7014118e+38"),
    ("exp2", "-inf", "0.0"),
    ("exp2", "inf", "inf"),
    ("log2", "1e-45", "-149.0"),  # log2 of the smallest subnormal
    ("log2", "0.0", "-inf"),
    ("log2", "-0.0", "-inf"),
    ("log2", "-1.0", "nan"),
    ("log2", "1.0", "0.0"),
    ("sqrt", "-0.0", "-0.0"),
    ("sqrt", "-1e-45", "nan"),
    ("recip", "-0.0", "-inf"),
    ("recip", "inf", "0.0"),
    ("sin", "-0.0", "-0.0"),
    ("sin", "inf", "nan"),
    ("cos", "-0.0", "1.0"),
    ("cos", "inf", "nan"),
]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize(("name", "operand", "expected"), HARD_CASES)
def test_hard_cases_follow_the_definition(backend, name, operand, expected):
    a = F(operand)
    _agree(name, getattr(backend, name)(a), F(expected), a)


@pytest.mark.parametrize("operand", ["1e30", "-1e30", "3.4028235e38", "1e-45", "1.5707964",
                                     "3.1415927", "6.2831855", "1e22", "8388608.5"])
@needs_mpfr
def test_sin_of_hard_arguments_agrees(operand):
    a = F(operand)
    _agree("sin", MPFR.sin(a), RATIONAL.sin(a), a)


@needs_mpfr
@pytest.mark.parametrize("name", ["exp2", "log2", "sin"])
def test_the_hardest_to_round_are_what_they_say(name):
    """generators/hard_to_round.py: each input's exact result lies within 2e-8 f32 ulps of
    the midpoint of two f32 (measured here with MPFR at 200 bits, apart from the search that
    found it), and both backends round it alike."""
    import gmpy2

    from gradient_conformance.generators.hard_to_round import HARD_TO_ROUND
    assert len(HARD_TO_ROUND[name]) >= 8
    for a in HARD_TO_ROUND[name]:
        with gmpy2.context(precision=200):
            y = abs(getattr(gmpy2, name)(gmpy2.mpfr(exact.decode(a))))
            scaled = gmpy2.frexp(y)[1] * 2**24
            assert abs(scaled - gmpy2.floor(scaled) - gmpy2.mpfr("0.5")) < 2e-8, hex(a)
        _agree(name, getattr(MPFR, name)(a), getattr(RATIONAL, name)(a), a)


@needs_mpfr
def test_log2_of_every_subnormal_exponent_agrees():
    for k in range(23):
        a = (1 << k) | 1  # a subnormal with a low bit set: log2 is not an integer
        _agree("log2", MPFR.log2(a), RATIONAL.log2(a), a)


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("-0.0", "-0.0", "-0.0"), ("-0.0", "0.0", "0.0"), ("1.0", "-1.0", "0.0"),
    ("inf", "-inf", "nan"), ("1e-45", "-1e-45", "0.0"),
    ("16777216.0", "1.0", "16777216.0"),  # 2^24 + 1: a tie, to even
    ("16777216.0", "3.0", "16777220.0"),  # 2^24 + 3: a tie, to even (upwards)
    ("3.4028235e38", "1.0141205e31", "inf"),  # max + 2^103, half an ulp: a tie, to even = inf
    ("3.4028235e38", "1.0141204e31", "3.4028235e38"),  # just below that tie
])
def test_add_special_values(a, b, expected):
    for backend in BACKENDS:
        _agree("add", backend.add(F(a), F(b)), F(expected), F(a), F(b))


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("-1e-45", "1e-45", "-0.0"),  # underflow keeps the sign
    ("0.0", "inf", "nan"), ("-0.0", "5.0", "-0.0"),
    ("1e-45", "0.5", "0.0"),  # half the smallest subnormal: a tie, to even
    ("1e-45", "1.5", "3e-45"),  # 1.5 quanta: a tie, to even (2 quanta)
])
def test_mul_special_values(a, b, expected):
    for backend in BACKENDS:
        _agree("mul", backend.mul(F(a), F(b)), F(expected), F(a), F(b))


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("1.0", "3.0", "0.33333334"), ("-1.0", "0.0", "-inf"), ("0.0", "0.0", "nan"),
    ("inf", "inf", "nan"), ("1.0", "-inf", "-0.0"), ("-0.0", "5.0", "-0.0"),
    ("1e-45", "2.0", "0.0"),  # half the smallest subnormal: a tie, to even
    ("3.4028235e38", "0.5", "inf"),
])
def test_div_special_values(a, b, expected):
    for backend in BACKENDS:
        _agree("div", backend.div(F(a), F(b)), F(expected), F(a), F(b))


def test_flush_and_binary64_rounding():
    assert exact.flush(0x00000001) == exact.POS_ZERO and exact.flush(0x80400000) == 0x80000000
    assert exact.flush(0x00800000) == 0x00800000 and exact.flush(exact.QUIET_NAN) == \
        exact.QUIET_NAN
    assert exact.f32_from_float(0.1) == F("0.1") and exact.f32_from_float(-0.0) == 0x80000000
    assert exact.f32_from_float(1e300) == exact.POS_INF
    assert exact.f32_from_float(float("nan")) == exact.QUIET_NAN


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_decimal_literals_round_once(backend):
    """A literal is the decimal rounded straight to f32, never through binary64 first. The
    expectation is the rational rounding of the exact decimal value."""
    from fractions import Fraction
    rng = random.Random("literals")
    texts = ["0.1", "1e-46", "7.006492321624085e-46", "7.006492321624086e-46",
             "340282356779733661637539395458142568447", "340282356779733661637539395458142568448",
             # 1 + 2^-24 + 2^-60: binary64 rounds it to 1 + 2^-24, a tie that f32 then rounds
             # down to 1; rounded once, it is above the tie and rounds up.
             "1.00000005960464477539930797162372371",
             ]
    texts += [f"{rng.uniform(-1, 1):.17e}"[:-4] + f"e{rng.randint(-50, 40)}" for _ in range(500)]
    for text in texts:
        want = exact.Rational.round(Fraction(text), negative_zero=text.startswith("-"))
        assert backend.from_decimal(text) == want, text
        assert exact.f32_from_text(text) == want, text


def test_shortest_text_reads_back_exactly():
    rng = random.Random("texts")
    for _ in range(2000):
        bits = rng.getrandbits(32)
        if exact.is_nan(bits):
            continue
        assert exact.f32_from_text(exact.f32_to_text(bits)) == bits


@needs_mpfr
def test_dyadic_rounding_agrees():
    rng = random.Random("dyadic")
    for _ in range(2000):
        mantissa, exponent = rng.getrandbits(rng.randint(1, 80)), rng.randint(-260, 140)
        mantissa *= rng.choice((1, -1))
        assert MPFR.from_dyadic(mantissa, exponent) == RATIONAL.from_dyadic(mantissa, exponent)


def test_bits_and_floats_convert_as_the_cpu_does():
    """`decode` and `encode` compute in integers (so that a process with FTZ or DAZ set
    decodes as any other, tests/impls/flushing.py); they agree with the CPU's own conversion,
    in its default environment, on every class of f32 and on random bits, and refuse a float
    that is no f32."""
    import math
    import struct

    rng = random.Random(7)
    edges = [0, 1, 2, 0x7FFFFF, 0x800000, 0x800001, 0x3F800000, 0x7F7FFFFF, 0x7F800000,
             0x7F800001, 0x7FC00000]
    for bits in [*edges, *(b | 0x80000000 for b in edges), *(rng.getrandbits(32)
                                                           for _ in range(20000))]:
        cpu = struct.unpack("<f", struct.pack("<I", bits))[0]
        value = exact.decode(bits)
        if math.isnan(cpu):
            assert math.isnan(value) and exact.encode(value) == exact.QUIET_NAN
            continue
        assert (value, math.copysign(1, value)) == (cpu, math.copysign(1, cpu)), hex(bits)
        assert exact.encode(value) == bits, hex(bits)
    for not_f32 in (0.1, 2.0**-150, 3 * 2.0**-150, 2.0**128, 1 + 2.0**-30):
        with pytest.raises(AssertionError, match="is not an f32 value"):
            exact.encode(not_f32)
