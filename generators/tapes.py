"""Hypothesis strategies for tapes (SPEC.md, "Tapes"): random, order-sensitive and invalid.

A tape is drawn as a plain list of entries (["input", v], ["const", v], ["add", i, j],
["mul", i, j]), values as Python floats that are f32 values, so it goes to any backprop as
it is. Every strategy shrinks towards short tapes of small values, operands towards entry 0.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from gradient_conformance.generators import choices
from gradient_conformance.generators.bounds import ordered, whole
from gradient_conformance.generators.buffers import any_f32, normal_f32, simplest_first
from gradient_conformance.reference import exact
from gradient_conformance.reference.conditions import G_CLASSES, VALUE_CLASSES
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


# --- Tapes by construction (docs/generators.md, "Enumerations") ------------------------------
#
# Enumerated, not drawn: every rule of the tape at every class of its operands and of the
# derivative it receives, and fan-in 1 to 9 to one entry, in structures whose processing
# orders (last to first, depth-first, Kahn's) differ, with shares whose sum depends on the
# order. Many small tapes ("rows") stand side by side in one tape, each summed into the last
# entry by an add (which passes 1.0 to each, exactly), so that a divergence is narrowed to
# the rows that differ, and a tape of those alone is run again.


@dataclass(frozen=True)
class EnumeratedTape:
    """One enumerated tape: its name, what it holds in words, its rows (each a tuple of the
    words that say it), and `write`, which makes the tape of any list of rows and, for each
    entry, the row it belongs to (None: an add summing the rows)."""

    name: str
    description: str
    rows: tuple[tuple[str, ...], ...]
    write: Callable[[Sequence[tuple[str, ...]]], tuple[list, list]] = field(repr=False)

    @functools.cached_property
    def _written(self) -> tuple[list, list]:
        return self.write(self.rows)

    @property
    def tape(self) -> list:
        return self._written[0]

    def rows_of(self, entries: Iterable[int]) -> list[int]:
        """The rows (indices into `rows`) that the entries `entries` belong to."""
        owners = self._written[1]
        return sorted({owners[k] for k in entries if 0 <= k < len(owners)} - {None})

    def narrowed(self, kept: Iterable[int]) -> EnumeratedTape:
        rows = tuple(self.rows[k] for k in kept)
        said = "; ".join(", ".join(row) for row in rows[:3])
        return replace(self, rows=rows, description=(
            f"{self.description}; narrowed to {len(rows)} of its {len(self.rows)} rows: "
            f"{said}{'; ...' if len(rows) > 3 else ''}"))


def _side_by_side(blocks: list[list]) -> tuple[list, list]:
    """Tapes side by side, their last entries summed by a chain of adds: the tape, and each
    entry's block (None for the chain)."""
    tape: list = []
    owners: list = []
    lasts = []
    for b, block in enumerate(blocks):
        base = len(tape)
        for entry in block:
            tape.append(entry if entry[0] in LEAVES else [entry[0], entry[1] + base,
                                                          entry[2] + base])
            owners.append(b)
        lasts.append(len(tape) - 1)
    total = lasts[0]
    for last in lasts[1:]:
        tape.append(["add", total, last])
        owners.append(None)
        total = len(tape) - 1
    return tape, owners


def _value(text: str) -> float:
    return float(np.float32(text))


# Where x stands in the entry whose rule is enumerated: operand i, operand j, or both.
PLACES = {"x-first": (0, 1), "x-second": (1, 0), "x-twice": (0, 0)}


def _rule_block(op: str, place: str, g: str):
    """x (an input of the row's first class) and v (a constant of its second, none for
    x-twice) through `op`, times a constant of class g: the op's entry receives g exactly."""
    def block(row: tuple[str, ...]) -> list:
        x, v = (_value(VALUE_CLASSES[name]) for name in (*row, "one")[:2])
        return [["input", x], ["const", v], [op, *PLACES[place]],
                ["const", _value(G_CLASSES[g])], ["mul", 2, 3]]
    return block


def tape_rule_cases() -> list[EnumeratedTape]:
    """add and mul at every pair of value classes of their operands (x as operand i, as j,
    and as both) and every class of the derivative the entry receives (+-0.0, NaN,
    subnormal, huge among them: an entry whose derivative is a zero still passes shares
    on)."""
    pairs = tuple((a, b) for a in VALUE_CLASSES for b in VALUE_CLASSES)
    cases = []
    for op in OPERATIONS:
        for place, (i, j) in PLACES.items():
            rows = pairs if i != j else tuple((a,) for a in VALUE_CLASSES)
            operands = "x twice" if i == j else \
                f"x ({'operand i' if i == 0 else 'operand j'}) and a constant"
            for g in G_CLASSES:
                block = _rule_block(op, place, g)
                cases.append(EnumeratedTape(
                    f"tape.{op}/{place}/g={g}",
                    f"{op} of {operands} at every value class, the {op} receiving g = "
                    f"{G_CLASSES[g]}", rows, functools.partial(_blocks_of, block)))
    return cases


def _blocks_of(block: Callable[[tuple[str, ...]], list], kept) -> tuple[list, list]:
    return _side_by_side([block(row) for row in kept])


# Shares whose left fold depends on the order: a big B and -B among small s's (2^25 absorbs
# 1.0 and 2.0 but not 3.0; 1.0 absorbs the smallest subnormal), and a huge H twice with -H
# (H + H overflows, H - H + H does not); and zeros, whose sum is -0.0 only if all are.
FAN_IN_VALUES = {"2^25 and 1.0": (2.0**25, 1.0), "1.0 and 1e-45": (1.0, 1e-45),
                 "3e38 and 3e38": (3e38, 3e38)}
MAX_FAN_IN = 9  # past numpy's eight running sums, by one


def _share_patterns(n: int) -> list[tuple[str, tuple[float, ...]]]:
    """The patterns of n shares: B at one place and -B at another, s elsewhere, for each
    (B, s) of FAN_IN_VALUES (from 3 shares on); every share -0.0; and, for one share,
    every class of G_CLASSES."""
    patterns = []
    for said, (big, small) in FAN_IN_VALUES.items():
        for i in range(n):
            for j in range(n):
                if i != j and n >= 3:
                    shares = [small] * n
                    shares[i], shares[j] = big, -big
                    patterns.append((f"{said}: B at {i}, -B at {j}", tuple(shares)))
    patterns.append(("every share -0.0", (-0.0,) * n))
    if n == 1:
        patterns += [(f"one share of class {g}", (_value(G_CLASSES[g]),)) for g in G_CLASSES]
    return patterns


FAN_IN_STRUCTURES = ("chain", "chain-swapped", "balanced")


def _fan_in_block(n: int, structure: str, descending: bool, shares: tuple[float, ...]) -> list:
    """x, and n products x * c_k, whose shares to x are c_k (each receives 1.0 from the adds
    summing them into the block's last entry): `chain` adds each product to the sum so far,
    `chain-swapped` the product first, `balanced` pairs them as a tree. `descending` makes
    the products in the reverse order of the shares."""
    block: list = [["input", 1.0]]
    made: dict[int, int] = {}
    for k in (range(n - 1, -1, -1) if descending else range(n)):
        block.append(["const", shares[k]])
        block.append(["mul", 0, len(block) - 1])
        made[k] = len(block) - 1
    level = [made[k] for k in range(n)]
    if structure == "balanced":
        while len(level) > 1:
            paired = []
            for k in range(0, len(level) - 1, 2):
                block.append(["add", level[k], level[k + 1]])
                paired.append(len(block) - 1)
            level = paired + level[len(level) - len(level) % 2:]
        return block
    total = level[0]
    for product in level[1:]:
        block.append(["add", total, product] if structure == "chain" else
                     ["add", product, total])
        total = len(block) - 1
    return block


def tape_fan_in_cases() -> list[EnumeratedTape]:
    """One entry (x) receiving 1 to MAX_FAN_IN shares, from products summed in each of
    FAN_IN_STRUCTURES, made in the order of their shares or the reverse, at every pattern of
    _share_patterns: the orders a walk could take (last to first, depth-first, Kahn's) and a
    sum's orders (left fold, right fold, pairwise, numpy's past eight) give other bits on
    some of them."""
    cases = []
    for n in range(1, MAX_FAN_IN + 1):
        patterns = dict(_share_patterns(n))
        for structure in FAN_IN_STRUCTURES:
            for descending in (False, True):
                rows = tuple((said,) for said in patterns)

                def write(kept, n=n, structure=structure, descending=descending,
                          patterns=patterns):
                    return _side_by_side([_fan_in_block(n, structure, descending,
                                                        patterns[row[0]]) for row in kept])
                cases.append(EnumeratedTape(
                    f"tape.fan-in/{n}/{structure}/{'descending' if descending else 'ascending'}",
                    f"x receiving {n} share{'s' if n > 1 else ''} from products summed as a "
                    f"{structure}, made in {'descending' if descending else 'ascending'} order",
                    rows, write))
    return cases


def tape_cases() -> list[EnumeratedTape]:
    """Every enumerated tape: the rules at every class, then fan-in."""
    return [*tape_rule_cases(), *tape_fan_in_cases()]
