"""Initial buffer contents for a program: anything at all, or smooth (away from every kink)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from gradient_conformance.generators import choices
from gradient_conformance.reference import exact
from gradient_conformance.reference.builder import build_program
from gradient_conformance.reference.cases import NUMPY, output_only, poisoned, slots_of
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.interp import Interpreter, from_numpy
from gradient_conformance.reference.realvalued import Real
from gradient_conformance.reference.syntax import parse

# Bit patterns worth having in any f32 input: both zeros, both infinities, NaN, the smallest
# and largest subnormal, the smallest normal, the largest finite, and 1.
SPECIAL_F32 = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
               0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x3F800000, 0xBF800000]
SPECIAL_I32 = [0, 1, -1, 2, exact.I32_MIN, exact.I32_MAX, 31, 32]
# How many ways a smooth case's drawn values are dealt before the draw is thrown away.
DEALINGS = 3


# Every element is read from a stream of small choices (choices.py), simplest kind first, so
# that a shrunk buffer holds +0.0 (the first special), 0 or false.
def simplest_first(low: int, high: int) -> tuple[int, ...]:
    """The integers low..high, 0 first, then -1, 1, -2, 2, ..."""
    return tuple(sorted(range(low, high + 1), key=lambda e: (abs(e), e > 0)))


SMOOTH_EXPONENTS = simplest_first(-10, 1)
MODERATE_EXPONENTS = simplest_first(-8, 8)


def normal_f32(s: choices.Stream, exponents: tuple[int, ...]) -> float:
    """A normal f32, signed: (2^23 + k) * 2^(e - 23) with e one of `exponents`, whose
    mantissa's low bytes shrink away (towards 1.0 * 2^e, positive, the first exponent)."""
    negative, e, k = s.flip(), s.choose(exponents), s.integer(0, 2**23 - 1)
    return (-1.0 if negative else 1.0) * (2**23 + k) * 2.0 ** (e - 23)


def smooth_f32(s: choices.Stream) -> float:
    """A smooth f32 input in [-4, 4], exact in f32, with a random mantissa and exponent:
    (2^24 - 1 - k) * 2^(e - 23), or a normal_f32. Values like 1.0 add and multiply exactly
    and would hide every question of rounding order, so the first form comes first and its
    shrink target (k = 0) is the all-ones mantissa, 1.9999999 * 2^e: a shrunk counterexample
    keeps inputs that round. The second form reaches the short mantissas (0.5, 1.5, 3.0)."""
    if s.flip():
        return normal_f32(s, SMOOTH_EXPONENTS)
    k = s.integer(0, 2**23 - 1)
    return (-1.0 if s.flip() else 1.0) * (2**24 - 1 - k) * \
        2.0 ** (s.choose(SMOOTH_EXPONENTS) - 23)


def any_f32(s: choices.Stream) -> float:
    """Any f32 value: a special (SPECIAL_F32, +0.0 first), a value of moderate size (2^-8
    to 2^9, a random mantissa whose low bytes shrink away), or any finite bit pattern. An
    infinity or NaN comes from the specials only: a bit pattern of exponent 255 drops to
    254."""
    kind = s.integer(0, 2)
    if kind == 0:
        return exact.decode(s.choose(SPECIAL_F32))
    if kind == 1:
        return normal_f32(s, MODERATE_EXPONENTS)
    bits = s.integer(0, 2**32 - 1)
    if (bits >> 23) & 0xFF == 0xFF:
        bits ^= 1 << 23
    return exact.decode(bits)


def any_i32(s: choices.Stream) -> int:
    """Any i32: a special (SPECIAL_I32, 0 first) or any value, shrinking towards 0."""
    if not s.flip():
        return s.choose(SPECIAL_I32)
    return s.signed(2**31 - 1)


# What an element of each dtype and mode is read as.
ELEMENTS = {
    ("f32", "anything"): any_f32,
    ("f32", "smooth"): smooth_f32,
    ("i32", "anything"): any_i32,
    ("i32", "smooth"): lambda s: s.signed(8),
    ("bool", "anything"): choices.Stream.flip, ("bool", "smooth"): choices.Stream.flip}
# The bytes an element reads at the most: a case's drawn elements come in one chunk.
ELEMENT_BYTES = 6

# Any f32 as a strategy of one value, for lists of them (the forward checks, vectors).
ANY_F32 = choices.stream_of(any_f32, ELEMENT_BYTES)


# What a build or a run over the reals that fails raises: no distance to measure.
_FAILED = (IRError, ArithmeticError, ValueError)


def kink_distance(source: str, buffers: dict[int, np.ndarray]) -> float:
    """How close the program's run on these inputs comes to a kink, measured over the reals
    (reference/realvalued.py): inf when it meets none, 0 when the run fails."""
    return distance_to_kink(parse(source), buffers)


def distance_to_kink(statements, buffers: dict[int, np.ndarray]) -> float:
    """kink_distance, for a program already parsed."""
    try:
        program = build_program(statements)
    except _FAILED:
        return 0.0
    return margin(program, buffers)


def margin(program, buffers: dict[int, np.ndarray]) -> float:
    """distance_to_kink, for a program already built (the suite's case-file check reads it
    too, conformance/running.py)."""
    real = Real(30)
    try:
        memory = {slot: from_numpy(array, program.buffers[slot].dtype, real)
                  for slot, array in buffers.items()}
        Interpreter(program, real).run(memory)
    except _FAILED:
        return 0.0
    return real.margin


def _deal(arrays: dict, slots: list, values: list[float], turn: int) -> dict:
    """`arrays` with the f32 `slots` dealt from `values` in turn, from the `turn`-th on."""
    dealt, j = dict(arrays), turn
    for slot, shape in slots:
        size = math.prod(shape)
        dealt[slot] = np.array([_dealt(values, j + k) for k in range(size)],
                               np.float32).reshape(shape)
        j += size
    return dealt


def _dealt(values: list[float], j: int) -> float:
    """The j-th f32 element dealt from `values`: each round through them scaled by another
    factor, so no two elements are equal (equal elements are a max's tie, a kink no input
    can leave)."""
    return values[j % len(values)] * (1 - (j // len(values)) % 16 / 16)


@st.composite
def buffers_for(draw, source: str, *, mode: str = "anything", min_kink_distance: float = 1e-3,
                f32_values: list[float] | None = None):
    """Initial contents for every slot `source` declares.

    mode="anything": the whole f32 range with both zeros, subnormals, infinities, NaN, huge and
    tiny values; i32 extremes. mode="smooth": f32 in [-4, 4], i32 in [-8, 8], and only inputs
    whose run stays at least `min_kink_distance` from every kink (rejected otherwise).
    `f32_values`, if given, are dealt into the f32 slots in turn instead of drawing (each
    round through them scaled, so no two elements are equal): a caller that draws them
    before the program keeps them fixed while the program shrinks; where a dealing brings
    the run near a kink, they are dealt again from the next value on (up to DEALINGS
    times) before the draw is rejected.
    A slot the program never loads starts as POISON. Shrinks towards zeros and the first
    special values.
    """
    return fill(draw, parse(source), mode=mode, min_kink_distance=min_kink_distance,
                f32_values=f32_values).buffers


class Filled(NamedTuple):
    """What `fill` drew: the buffers; in smooth mode, their kink distance and the program as
    the spec builds it (which the check reads again rather than build again), else None."""

    buffers: dict
    kink_distance: float | None
    built: object


def fill(draw, statements, *, mode: str = "anything", min_kink_distance: float = 1e-3,
         f32_values: list[float] | None = None) -> Filled:
    """buffers_for, for a program already parsed, drawn with the caller's `draw` (Filled),
    so that a drawn case runs the real-valued interpreter only here: once, or once per
    dealing tried (DEALINGS). A plain function, not a strategy: a strategy of its own, made
    anew for each program, would be validated anew by Hypothesis (choices.py)."""
    assert mode in ("anything", "smooth"), mode
    arrays, dealt_slots = {}, []
    if f32_values:
        # Largest first: when Hypothesis shrinks the values towards 0, the first element (all
        # a scalar slot gets) keeps the value that still matters.
        f32_values = sorted(f32_values, key=lambda v: -abs(v))
    stored_only = output_only(statements)
    drawn = []
    for slot, (dtype, shape) in sorted(slots_of(statements).items()):
        if slot in stored_only and dtype != "bool":
            arrays[slot] = poisoned((dtype, shape))
        elif dtype == "f32" and f32_values:
            dealt_slots.append((slot, shape))
        else:
            drawn.append((slot, dtype, shape))
    # Every drawn element from one chunk: one choice for all the buffers, which the shrinker
    # takes to zeros byte by byte.
    stream = choices.Stream(draw, ELEMENT_BYTES * sum(math.prod(s) for _, _, s in drawn))
    for slot, dtype, shape in drawn:
        values = [ELEMENTS[dtype, mode](stream) for _ in range(math.prod(shape))]
        arrays[slot] = np.array(values, dtype=NUMPY[dtype]).reshape(shape)
    values = f32_values or []
    if mode != "smooth":
        return Filled(_deal(arrays, dealt_slots, values, 0), None, None)
    # Dealt values that bring the run near a kink are dealt again from the next one on,
    # before the draw is thrown away: another dealing is another point of the same program.
    # The program is built once for all its dealings.
    try:
        program = build_program(statements)
    except _FAILED:
        assume(False)
    for turn in range(DEALINGS if dealt_slots else 1):
        dealt = _deal(arrays, dealt_slots, values, turn)
        distance = margin(program, dealt)
        if distance >= min_kink_distance:
            return Filled(dealt, distance, program)
    assume(False)
