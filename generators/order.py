"""Gradients whose bits depend on the order shares arrive in: `order_sensitive_gradients`,
and the walk's order as the spec defines it. docs/generators.md, "Generators"; SPEC.md, "The walk".
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from gradient_conformance import reference
from gradient_conformance.generators import choices
from gradient_conformance.generators.bounds import Bounds
from gradient_conformance.generators.buffers import smooth_f32
from gradient_conformance.generators.case import Case
from gradient_conformance.reference import exact
from gradient_conformance.reference.ops import (
    features_of_statements,
)
from gradient_conformance.reference.program import Define
from gradient_conformance.reference.syntax import parse

# --- order-sensitive gradients ------------------------------------------------------------------

# Share values that cancel and absorb each other in f32.
ORDER_CONSTANTS = ("1e8", "-1e8", "1.0", "3.0", "16777216.0", "-16777216.0", "0.5", "-3.0",
                   "1e-8", "7.0")
# Distinct small shares, for the constants built when the drawn ones tell nothing.
SMALL_SHARES = ("1.0", "3.0", "7.0", "0.5", "-3.0", "1e-8")


def _sum_tree(s: choices.Stream, lines: list[str], leaves: list[str], prefix: str) -> str:
    """Add the leaves in a random tree (repeatedly two of the partial sums), writing the adds
    as %{prefix}0, %{prefix}1, ...; the root's name."""
    partial, n = list(leaves), 0
    while len(partial) > 1:
        a = partial.pop(s.integer(0, len(partial) - 1))
        b = partial.pop(s.integer(0, len(partial) - 1))
        lines.append(f"%{prefix}{n} = add {a} {b}")
        partial.append(f"%{prefix}{n}")
        n += 1
    return partial[0]


def order_sensitive_gradients(*, min_shares: int = 3, max_shares: int = 6
                              ) -> st.SearchStrategy[Case]:
    """x receives min_shares..max_shares shares c_k (y is a sum of x * c_k, the c_k loaded, in
    a random tree and order) whose f32 sum depends on the order: the spec's arrival order
    gives different bits from program order and from reversed arrival order. Sometimes y
    also adds a detached second tree over the same terms first: it passes no share, but the
    walk's post-order descends through it, so it alone decides the arrival order (SPEC.md,
    "The walk"), which must then give other bits than the order without it. Where the trees
    drawn make two of these orders fold alike, one is mirrored, and where the constants
    drawn do not tell them apart, others are built that do: at most 1% of draws are thrown
    away. Shrinks towards three shares, the first constants and no shadow."""
    return _order_sensitive_gradients(Bounds(min_shares=min_shares, max_shares=max_shares))


@st.composite
def _order_sensitive_gradients(draw, b: Bounds) -> Case:
    s = choices.Stream(draw)
    count = s.integer(b.min_shares, b.max_shares)
    constants = [s.choose(ORDER_CONSTANTS) for _ in range(count)]
    lines = ["%xin = buffer slot=0 dtype=f32 shape=[]",
             f"%cin = buffer slot=1 dtype=f32 shape=[{count}]",
             "%out = buffer slot=2 dtype=f32 shape=[]", "%x = load %xin"]
    lines += [f"%c{k} = load %cin {k}" for k in range(count)]
    terms = []
    for k in range(count):
        swap = s.flip()
        lines.append(f"%t{k} = mul {'%c' + str(k) if swap else '%x'} "
                     f"{'%x' if swap else '%c' + str(k)}")
        terms.append(f"%t{k}")
    y = _sum_tree(s, lines, terms, "s")
    ending = [f"%g = gradient {y} %x", "store %out %g"]
    shadowed = s.flip()
    root = y
    if shadowed:
        shadow = _sum_tree(s, lines, s.order(terms), "w")
        lines += [f"%d = detach {shadow}", f"%y = add %d {y}"]
        ending[0] = "%g = gradient %y %x"
        root = "%y"
    arrival = walked_order(lines, root)
    program_order = list(range(count))
    # Where the trees drawn make the arrival order fold as an order it must be told from,
    # mirror a tree (its adds' operands swapped), which reverses the order it decides.
    if _alike(arrival, program_order):
        lines = _mirrored(lines, "w" if shadowed else "s")
        arrival = walked_order(lines, root)
    if shadowed and _alike(arrival, walked_order(lines, y)):
        lines = _mirrored(lines, "s")
    if shadowed:
        unshadowed, arrival = walked_order(lines, y), walked_order(lines, root)
    source = "\n".join(lines + ending) + "\n"
    orders = [program_order, list(reversed(arrival))] + ([unshadowed] if shadowed else [])
    # The constants drawn, or the first rotation of them whose sum tells the arrival order
    # from the others: cheap to try (nothing is built), so few draws are thrown away.
    rotations = [constants[r:] + constants[:r] for r in range(count)]
    telling = next((c for c in rotations + _cancelling(arrival) if _tells(c, arrival, orders)),
                   None)
    assume(telling is not None)  # only where none of the constants tried tells them
    assert telling is not None
    constants = telling
    bits = [_constant_bits(c) for c in constants]
    x = smooth_f32(s)
    buffers = {0: np.array(x, np.float32), 1: exact.to_numpy_f32(bits),
               2: np.zeros((), np.float32)}
    statements = parse(source)
    return Case(source, buffers, None, f"order-sensitive: x receives {count} shares "
                f"{', '.join(constants[k] for k in arrival)} in arrival order"
                f"{', set by a detached tree' if shadowed else ''}",
                features=features_of_statements(statements), parsed=tuple(statements))


def _alike(order: list[int], other: list[int]) -> bool:
    """Whether the f32 left folds of any shares in these two orders are equal: only where the
    orders differ at most in their first two, which the first add takes in either order."""
    return order[2:] == other[2:] and set(order[:2]) == set(other[:2])


def _mirrored(lines: list[str], prefix: str) -> list[str]:
    """The lines with the operands of every add %{prefix}N swapped: the tree's leaves, read
    left to right, come in reverse."""
    def mirror(line: str) -> str:
        name, _, rest = line.partition(" = ")
        _, a, b = rest.split()
        return f"{name} = add {b} {a}"
    return [mirror(line) if line.startswith(f"%{prefix}") and " = add " in line else line
            for line in lines]


def _cancelling(arrival: list[int]) -> list[list[str]]:
    """Constants built to tell the arrival order from others, when the drawn ones do not:
    1e8 and -1e8 cancel, and the other shares are small, which an order that meets either
    big one first (ulp(1e8) = 8) absorbs. One placement of the pair per two positions in the
    arrival order, the pair arriving one after the other first; the pair apart tells the
    orders that differ only past it (0 1 3 2 from 0 1 2 3 and from its own reverse). The
    small shares are all 1.0, then distinct, so that which of them survive also tells. Tried
    on 10,121 random arrival orders of 3 to 6 shares, each against program order, its own
    reverse and half the time one more order, none folding alike with it, they tell all but
    two."""
    pairs = sorted(itertools.combinations(range(len(arrival)), 2), key=lambda p: p[1] - p[0])
    built = []
    for small in (["1.0"] * len(arrival), SMALL_SHARES[:len(arrival)]):
        for i, j in pairs:
            constants = [""] * len(arrival)
            for position, k in enumerate(arrival):
                constants[k] = small[position]
            constants[arrival[i]], constants[arrival[j]] = "1e8", "-1e8"
            built.append(constants)
    return built


@functools.cache
def _constant_bits(text: str) -> int:
    """The f32 bits of a share constant, read once: the constants are few, and reading a
    decimal exactly is the dearest step of trying them."""
    return exact.f32_from_text(text)


def _tells(constants: list[str], arrival: list[int], others: list[list[int]]) -> bool:
    """Whether the f32 left fold of the constants in arrival order differs from each fold
    in the `others` orders."""
    bits = [_constant_bits(c) for c in constants]
    fold = exact.f32_fold([bits[k] for k in arrival])
    return not any(exact.same_f32(fold, exact.f32_fold([bits[k] for k in order]))
                   for order in others)


def walked_order(lines: list[str], root: str) -> list[int]:
    """The order in which x's shares arrive, as indices k of the terms %t{k} = mul x c_k,
    read from the lines of an order-sensitive program as the spec's walk takes them
    (SPEC.md, "The walk"): the reverse of the post-order from the loss (operands left to
    right, each node once), the adds hash-consed as the reference does (one node per
    operator and operands). Nothing is built: drawing stays cheap. `arrival_order` builds
    the program and reads the reference's own walk; a test holds the two equal."""
    node: dict[str, tuple] = {}
    for line in lines:
        name, equals, rest = line.partition(" = ")
        if not equals:
            continue  # a store: no node
        op, *operands = rest.split()
        if op == "mul" and name.startswith("%t"):
            node[name] = ("term", int(name[2:]))
        elif op in ("add", "detach"):
            node[name] = (op, *(node[o] for o in operands))
    order, seen, stack = [], set(), [(node[root], False)]
    while stack:  # iterative: a deep tree must not recurse
        key, done = stack.pop()
        if done:
            order.append(key)
        elif key not in seen:
            seen.add(key)
            stack.append((key, True))
            if key[0] != "term":
                stack.extend((child, False) for child in reversed(key[1:]))
    return [key[1] for key in reversed(order) if key[0] == "term"]


def arrival_order(source: str) -> list[int]:
    """The order in which x's shares arrive in the reference, as indices k of the terms
    %t{k} = mul x c_k of an order-sensitive program."""
    program = reference.compile_program(source)
    expansion = next(s.expansion for s in program.statements
                     if isinstance(s, Define) and s.expansion)
    visit = next(v for v in expansion.visits if v.node is expansion.x)
    order = []
    for share in visit.shares:  # each share is mul g c_k
        loaded = next(o for o in share.operands if o.op == "load")
        order.append(loaded.operands[1].attr("value"))
    return order
