"""Hypothesis strategies for tapes (SPEC.md, "Tapes"): random, order-sensitive and invalid.

A tape is drawn as a plain list of entries (["input", v], ["const", v], ["add", i, j],
["mul", i, j]), values as Python floats that are f32 values, so it goes to any backprop as
it is. Every strategy shrinks towards short tapes of small values, operands towards entry 0.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from gradient_conformance.generators import choices
from gradient_conformance.generators.buffers import ANY_F32
from gradient_conformance.reference import exact
from gradient_conformance.reference.tape import LEAVES


@dataclass(frozen=True)
class TapeCase:
    """A tape, and the kind of TapeError it must raise (None for a valid tape)."""

    tape: list
    expect_error: str | None
    description: str


OPS = ("add", "mul")
_SMOOTH_F32 = st.floats(-64.0, 64.0, width=32)


@functools.cache
def _extra_shares(most: int):
    return st.lists(st.sampled_from((1.0, 0.25, 7.0, -2.0)), max_size=most)


def f32_values(*, smooth: bool = False):
    """f32 values as Python floats: anything (NaN and infinities included), or, smooth, the
    finite values between -64 and 64 that no product of a short tape overflows."""
    return _SMOOTH_F32 if smooth else ANY_F32


@st.composite
def tapes(draw, *, min_entries: int = 1, max_entries: int = 12,
          smooth: bool = False) -> TapeCase:
    """Valid tapes: an input first, then leaves, adds and muls of any earlier entries (an
    entry may use the same operand twice, or none may use it). Shrinks towards one input of
    0.0."""
    size = choices.integer(draw, min_entries, max_entries)
    tape: list = [["input", draw(f32_values(smooth=smooth))]]
    for k in range(1, size):
        if choices.integer(draw, 0, 2) == 0:
            tape.append([choices.choose(draw, LEAVES), draw(f32_values(smooth=smooth))])
        else:
            tape.append([choices.choose(draw, OPS), choices.integer(draw, 0, k - 1),
                         choices.integer(draw, 0, k - 1)])
    return TapeCase(tape, None, f"a tape of {len(tape)} entries")


@st.composite
def single_use_tapes(draw, *, max_leaves: int = 6, smooth: bool = False) -> TapeCase:
    """Trees: every entry but the last is used exactly once, so each receives one share and
    the IR program with the same ops (reference.tape.to_program) gives the same bits. The
    leaves come first, then each add or mul takes two unused entries. Shrinks towards one
    leaf."""
    leaves = choices.integer(draw, 1, max_leaves)
    tape: list = [[choices.choose(draw, LEAVES), draw(f32_values(smooth=smooth))]
                  for _ in range(leaves)]
    unused = list(range(leaves))
    while len(unused) > 1:
        i = unused.pop(choices.integer(draw, 0, len(unused) - 1))
        j = unused.pop(choices.integer(draw, 0, len(unused) - 1))
        tape.append([choices.choose(draw, OPS), i, j])
        unused.append(len(tape) - 1)
    return TapeCase(tape, None, f"a tree of {leaves} leaves")


@st.composite
def order_sensitive_tapes(draw, *, max_extra: int = 3) -> TapeCase:
    """Tapes where one input receives shares whose f32 sum depends on the order: x times
    constants, summed by a chain of adds. At the core are B, -B and a small s at one end,
    so that one order cancels B first and keeps s, and the other absorbs s into B; up to
    `max_extra` more constants follow. The arrival order (the spec's: reversed program
    order) and program order give other bits. Shrinks towards the three core shares."""
    big = choices.choose(draw, (1e8, 2.0**27, 2.0**30)) * choices.choose(draw, (1.0, -1.0))
    small = choices.choose(draw, (1.0, 0.5, 3.0, -1.0))
    constants = [big, -big, small] if draw(st.booleans()) else [small, big, -big]
    constants += draw(_extra_shares(max_extra))
    x = choices.choose(draw, (1.0, 0.5, -2.0))
    tape: list = [["input", x]]
    products = []
    for c in constants:
        tape.append(["const", c])
        tape.append(["mul", 0, len(tape) - 1])
        products.append(len(tape) - 1)
    total = products[0]
    for p in products[1:]:
        tape.append(["add", total, p])
        total = len(tape) - 1
    shares = [_bits(c) for c in constants]  # the mul passes 1.0 * c to x
    arrival = exact.f32_fold(shares[::-1])  # the last product is processed first
    assume(not exact.same_f32(arrival, exact.f32_fold(shares)))
    return TapeCase(tape, None, f"x receives {len(constants)} shares; their f32 sum depends "
                    "on the order")


def _bits(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


# How to break a valid tape of k entries: one more entry, and the kind of TapeError it raises.
BREAKS = {
    "operand-later": lambda draw, k: (["add", 0, k + draw(st.integers(1, 3))], "operand"),
    "operand-self": lambda draw, k: ([draw(st.sampled_from(("add", "mul"))),
                                      draw(st.sampled_from([0, k])), k], "operand"),
    "operand-negative": lambda draw, k: (["mul", draw(st.integers(-3, -1)), 0], "operand"),
    "operand-not-int": lambda draw, k: (["add", 0, draw(st.sampled_from(
        [0.0, 1.5, "0", None, True]))], "operand"),
    "unknown-kind": lambda draw, k: ([draw(st.sampled_from(
        ["sub", "Add", "input ", "neg", "", "gradient", None, 1])), 0, 0], "kind"),
    "wrong-arity": lambda draw, k: (draw(st.sampled_from(
        [["add", 0], ["mul", 0, 0, 0], ["input"], ["const", 1.0, 2.0], []])), "entry"),
    "bad-value": lambda draw, k: ([draw(st.sampled_from(LEAVES)), draw(st.sampled_from(
        ["1.0", None, [1.0], True]))], "value"),
}


@st.composite
def invalid_tapes(draw, *, max_entries: int = 6) -> TapeCase:
    """Tapes that backprop must reject, each with the kind of error: the empty tape, an
    operand that is not an earlier entry (later, itself, negative, not an integer), an
    unknown kind, a wrong number of fields, a value that is not a number. Shrinks towards
    the empty tape."""
    how = choices.choose(draw, ("empty", *BREAKS))
    if how == "empty":
        return TapeCase([], "empty", "the empty tape")
    base = draw(tapes(max_entries=max_entries)).tape
    entry, kind = BREAKS[how](draw, len(base))
    return TapeCase([*base, entry], kind, f"{how}: {entry!r} after {len(base)} valid entries")
