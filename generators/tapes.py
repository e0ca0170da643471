"""Hypothesis strategies for tapes (SPEC.md, "Tapes"): random, order-sensitive and invalid.

A tape is drawn as a plain list of entries (["input", v], ["const", v], ["add", i, j],
["mul", i, j]), values as Python floats that are f32 values, so it goes to any backprop as
it is. Every strategy shrinks towards short tapes of small values, operands towards entry 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from gradient_conformance.generators import choices
from gradient_conformance.generators.bounds import ordered, whole
from gradient_conformance.generators.buffers import any_f32, normal_f32, simplest_first
from gradient_conformance.reference import exact
from gradient_conformance.reference.tape import LEAVES, OPERATIONS


@dataclass(frozen=True)
class TapeCase:
    """A tape, and the kind of TapeError it must raise (None for a valid tape)."""

    tape: list
    expect_error: str | None
    description: str


EXTRA_SHARES = (1.0, 0.25, 7.0, -2.0)
TAPE_EXPONENTS = simplest_first(-8, 5)  # of a smooth value


MAX_ENTRIES = 1000  # more than any tape a check needs; a bound past it is a mistake


def _flag(name: str, value) -> None:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be True or False")


def f32_value(s: choices.Stream, *, smooth: bool = False) -> float:
    """An f32 value as a Python float: anything (NaN and infinities included), or, smooth, a
    finite value between -64 and 64, which no product of a short tape overflows: an f32 of
    exponent -8 to 5 (or 0.0), shrinking towards 0.0, then short mantissas."""
    if not smooth:
        return any_f32(s)
    return normal_f32(s, TAPE_EXPONENTS) if s.flip() else 0.0


def tapes(*, min_entries: int = 1, max_entries: int = 12,
          smooth: bool = False) -> st.SearchStrategy[TapeCase]:
    """Valid tapes: an input first, then leaves, adds and muls of any earlier entries (an
    entry may use the same operand twice, or none may use it). Shrinks towards one input of
    0.0."""
    whole("min_entries", min_entries, at_least=1, at_most=MAX_ENTRIES)
    whole("max_entries", max_entries, at_least=1, at_most=MAX_ENTRIES)
    ordered("min_entries", min_entries, "max_entries", max_entries)
    _flag("smooth", smooth)
    return _tapes(min_entries, max_entries, smooth)


@st.composite
def _tapes(draw, min_entries: int, max_entries: int, smooth: bool) -> TapeCase:
    return _tape(choices.Stream(draw), min_entries, max_entries, smooth)


def _tape(s: choices.Stream, min_entries: int, max_entries: int, smooth: bool) -> TapeCase:
    """A tapes() case, read from the caller's stream (a strategy drawn from inside another
    would be made, and validated, anew for every case: choices.py)."""
    size = s.integer(min_entries, max_entries)
    tape: list = [["input", f32_value(s, smooth=smooth)]]
    for k in range(1, size):
        if s.integer(0, 2) == 0:
            tape.append([s.choose(LEAVES), f32_value(s, smooth=smooth)])
        else:
            tape.append([s.choose(OPERATIONS), s.integer(0, k - 1), s.integer(0, k - 1)])
    return TapeCase(tape, None, f"a tape of {len(tape)} entr{'y' if len(tape) == 1 else 'ies'}")


def single_use_tapes(*, max_leaves: int = 6, smooth: bool = False
                     ) -> st.SearchStrategy[TapeCase]:
    """Trees: every entry but the last is used exactly once, so each receives one share and
    the IR program with the same ops (reference.tape.to_program) gives the same bits. The
    leaves come first, then each add or mul takes two unused entries. Shrinks towards one
    leaf."""
    whole("max_leaves", max_leaves, at_least=1, at_most=MAX_ENTRIES)
    _flag("smooth", smooth)
    return _single_use_tapes(max_leaves, smooth)


@st.composite
def _single_use_tapes(draw, max_leaves: int, smooth: bool) -> TapeCase:
    s = choices.Stream(draw)
    leaves = s.integer(1, max_leaves)
    tape: list = [[s.choose(LEAVES), f32_value(s, smooth=smooth)] for _ in range(leaves)]
    unused = list(range(leaves))
    while len(unused) > 1:
        i = unused.pop(s.integer(0, len(unused) - 1))
        j = unused.pop(s.integer(0, len(unused) - 1))
        tape.append([s.choose(OPERATIONS), i, j])
        unused.append(len(tape) - 1)
    return TapeCase(tape, None, f"a tree of {leaves} leaves")


def order_sensitive_tapes(*, max_extra: int = 3) -> st.SearchStrategy[TapeCase]:
    """Tapes where one input receives shares whose f32 sum depends on the order: x times
    constants, summed by a chain of adds. At the core are B, -B and a small s at one end,
    so that one order cancels B first and keeps s, and the other absorbs s into B; up to
    `max_extra` more constants follow. The arrival order (the spec's: reversed program
    order) and program order give other bits. Shrinks towards the three core shares."""
    whole("max_extra", max_extra, at_least=0, at_most=MAX_ENTRIES)
    return _order_sensitive_tapes(max_extra)


@st.composite
def _order_sensitive_tapes(draw, max_extra: int) -> TapeCase:
    s = choices.Stream(draw)
    big = s.choose((1e8, 2.0**27, 2.0**30)) * s.choose((1.0, -1.0))
    small = s.choose((1.0, 0.5, 3.0, -1.0))
    constants = [big, -big, small] if s.flip() else [small, big, -big]
    constants += [s.choose(EXTRA_SHARES) for _ in range(s.integer(0, max_extra))]
    x = s.choose((1.0, 0.5, -2.0))
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
    "operand-later": lambda s, k: (["add", 0, k + s.integer(1, 3)], "operand"),
    "operand-self": lambda s, k: ([s.choose(("add", "mul")), s.choose((0, k)), k], "operand"),
    "operand-negative": lambda s, k: (["mul", -s.integer(1, 3), 0], "operand"),
    "operand-not-int": lambda s, k: (["add", 0, s.choose((0.0, 1.5, "0", None, True))],
                                     "operand"),
    "unknown-kind": lambda s, k: ([s.choose(("sub", "Add", "input ", "neg", "", "gradient",
                                             None, 1)), 0, 0], "kind"),
    "wrong-arity": lambda s, k: (s.choose((["add", 0], ["mul", 0, 0, 0], ["input"],
                                           ["const", 1.0, 2.0], [])), "entry"),
    "bad-value": lambda s, k: ([s.choose(LEAVES), s.choose(("1.0", None, [1.0], True))],
                               "value"),
}


def invalid_tapes(*, max_entries: int = 6) -> st.SearchStrategy[TapeCase]:
    """Tapes that backprop must reject, each with the kind of error: the empty tape, an
    operand that is not an earlier entry (later, itself, negative, not an integer), an
    unknown kind, a wrong number of fields, a value that is not a number. Shrinks towards
    the empty tape."""
    whole("max_entries", max_entries, at_least=1, at_most=MAX_ENTRIES)
    return _invalid_tapes(max_entries)


@st.composite
def _invalid_tapes(draw, max_entries: int) -> TapeCase:
    s = choices.Stream(draw)
    how = s.choose(("empty", *BREAKS))
    if how == "empty":
        return TapeCase([], "empty", "the empty tape")
    base = _tape(s, 1, max_entries, smooth=False).tape
    entry, kind = BREAKS[how](s, len(base))
    return TapeCase([*base, entry], kind, f"{how}: {entry!r} after {len(base)} valid entries")
