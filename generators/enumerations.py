"""Bounded-exhaustive cases, enumerated from the tables rather than drawn: every value class at
every operand position of every rule, as a loaded operand and as a literal, with the incoming
gradient g of every class, for the first derivative and the second. docs/generators.md,
"Enumerations" (which says why they are not yet a check of the suite).

The small-scope hypothesis: a rule that is wrong at a signed zero, a NaN, a subnormal, a tie
or a negative g is wrong on some program of a few statements with that value there. Hypothesis
reaches such a value only by chance, and seldom in the position that matters (the literal on
the right of a max, the g of a where's unselected side); here each combination is an element
of one program, so one run of the implementation compares them all.

A rule's row (reference/rules.py, RULES) is enumerated when its op is an elementwise op on f32
(reference/ops.py): a new such op or row gets its enumeration with no code here; a row that is
not (a reduce, an expand, a reshape, a cast, a detach) says why (`not_by_value`, from its op's
entry in the table), and a test holds that every row is one or the other. Each case is a
program: the op over loaded vectors whose elements run through every pair of value classes
and every class of g, the weight `w` that the loss multiplies the op's result by (so the
gradient reaching the op is exactly w); the same with each class as a literal on either side,
the same operand twice, and the gradient of the gradient.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from gradient_conformance.reference import exact
from gradient_conformance.reference.ops import OPS
from gradient_conformance.reference.rules import RULES

# The classes of f32 value a rule treats apart, each written as the literal that is it: both
# zeros, both smallest subnormals, both smallest normals, +-1, an ordinary value, magnitudes
# past 2^63 (whose squares overflow and reciprocals of squares go subnormal), both infinities
# and NaN. A pair of equal classes is a tie.
VALUE_CLASSES = ("0.0", "-0.0", "1e-45", "-1e-45", "1.1754944e-38", "-1.1754944e-38", "1.0",
                 "-1.0", "0.75", "3e19", "-3e19", "inf", "-inf", "nan")
# The classes of the incoming gradient g: 1.0 (what a loss sends), negative, both zeros, NaN,
# subnormal, and huge (a share that overflows).
G_CLASSES = ("1.0", "-2.5", "0.0", "-0.0", "nan", "1e-45", "3e38")



def not_by_value(row: str) -> str:
    """Why a row of RULES is not enumerated by value pairs ("" when it is), derived from its
    op's entry in the table: a where by `where_cases`; a shape rule (its shares are sums over
    axes) by every axis set and by `reduce_case`; a cast or bitcast, whose dtype decides it;
    a detach, which passes no share."""
    op = OPS[row.split(".")[0]]
    if op.computed("f32") is not None:
        return ""
    if op.arity == 3:
        return "its condition is a bool: enumerated by `where_cases`, not by value pairs"
    if op.attributes & {"shape", "axis", "op"}:
        return ("a shape rule, its shares sums over axes: test_gradient_bits.py's every axis "
                "set, and `reduce_case` for reduce's rows")
    if "dtype" in op.attributes:
        return "its dtype, not a value, decides it: the generators' casts and round trips"
    return "it passes no share: the generators and the rejection checks"


@dataclass
class Enumerated:
    """One enumerated case: its program, its initial buffers (slot -> array), the op whose
    rule it is about, and what it holds, in words."""

    name: str
    op: str
    source: str
    buffers: dict = field(default_factory=dict)
    description: str = ""


def enumerated_ops() -> list[str]:
    """The rows of RULES enumerated by value: those of elementwise f32 ops."""
    return [key for key in RULES if not not_by_value(key)]


def _f32(texts) -> np.ndarray:
    return np.array([exact.decode(exact.f32_from_text(t)) for t in texts], np.float32)


class _Program:
    """Lines and buffers of a program being written: buffers declared first (slots in
    order), then the statements."""

    def __init__(self):
        self.declared: list[str] = []
        self.lines: list[str] = []
        self.buffers: dict[int, np.ndarray] = {}

    def buffer(self, name: str, values: np.ndarray) -> str:
        slot = len(self.buffers)
        self.declared.append(f"%{name} = buffer slot={slot} dtype={_DTYPE[values.dtype.kind]} "
                             f"shape=[{', '.join(map(str, values.shape))}]")
        self.buffers[slot] = values
        return f"%{name}"

    def output(self, name: str, value: str, shape: tuple[int, ...]) -> None:
        slot = self.buffer(f"out_{name}", np.zeros(shape, np.float32))
        self.lines.append(f"store {slot} {value}")

    def gradient(self, name: str, result: str, weight: str, x: str, shape, *,
                 stored: bool = True) -> str:
        """The loss sum(result * weight), its gradient against x (stored as `name`, unless
        not `stored`): the g reaching `result` is `weight`, element by element."""
        self.lines += [f"%m_{name} = mul {result} {weight}",
                       f"%l_{name} = reduce %m_{name} op=add",
                       f"%g_{name} = gradient %l_{name} {x}"]
        if stored:
            self.output(name, f"%g_{name}", shape)
        return f"%g_{name}"

    def text(self) -> str:
        return "\n".join(self.declared + self.lines) + "\n"


_DTYPE = {"f": "f32", "i": "i32", "b": "bool"}


def _grid(*columns: tuple[str, ...]) -> list[np.ndarray]:
    """Every combination of the columns' classes, one element each: a vector per column."""
    rows = list(itertools.product(*columns))
    return [_f32([row[k] for row in rows]) for k in range(len(columns))]


def rule_cases(op: str) -> list[Enumerated]:
    """`op`'s rule at every value class of each operand and of g, a program for each kind of
    operand (small, so that a divergence is reduced and explained at little cost):
    `loaded`, both operands loaded over every pair of classes (a tie on the diagonal);
    `second`, the gradient of that gradient; `same`, the operand twice; `literal-right` and
    `literal-left`, each class as a literal on that side. A unary op: its operand over every
    class, and the second derivative."""
    about = f"the rule of {op}"
    g_said = f"g of each of {len(G_CLASSES)} classes"
    if OPS[op].arity == 1:
        found = []
        for second in (False, True):
            p = _Program()
            a, g = _grid(VALUE_CLASSES, G_CLASSES)
            p.lines += [f"%xa = load {p.buffer('a', a)}", f"%wv = load {p.buffer('w', g)}",
                        f"%y = {op} %xa"]
            first = p.gradient("da", "%y", "%wv", "%xa", a.shape, stored=not second)
            if second:
                p.gradient("dda", first, "%wv", "%xa", a.shape)
            found.append(Enumerated(f"{op}/{'second' if second else 'loaded'}", op, p.text(),
                                    p.buffers, f"{about} at each of {len(VALUE_CLASSES)} "
                                    f"value classes, with {g_said}"
                                    + ("; its second derivative" if second else "")))
        return found
    found = []
    for kind in ("loaded", "second"):
        p = _Program()
        a, b, g = _grid(VALUE_CLASSES, VALUE_CLASSES, G_CLASSES)
        p.lines += [f"%xa = load {p.buffer('a', a)}", f"%xb = load {p.buffer('b', b)}",
                    f"%wv = load {p.buffer('w', g)}", f"%y = {op} %xa %xb"]
        second = kind == "second"
        da = p.gradient("da", "%y", "%wv", "%xa", a.shape, stored=not second)
        db = p.gradient("db", "%y", "%wv", "%xb", a.shape, stored=not second)
        if second:
            p.gradient("dda", da, "%wv", "%xa", a.shape)
            p.gradient("ddb", db, "%wv", "%xb", a.shape)
            p.gradient("dab", da, "%wv", "%xb", a.shape)
        found.append(Enumerated(f"{op}/{kind}", op, p.text(), p.buffers, (
            f"{about} at every pair of {len(VALUE_CLASSES)} value classes (ties on the "
            f"diagonal), with {g_said}" + ("; its second derivatives" if second else ""))))
    for kind in ("same", "literal-right", "literal-left"):
        p = _Program()
        other, g = _grid(VALUE_CLASSES, G_CLASSES)
        p.lines += [f"%xo = load {p.buffer('o', other)}", f"%wv = load {p.buffer('w', g)}"]
        written = [("", "%xo %xo")] if kind == "same" else [
            (str(k), f"%xo {literal}" if kind == "literal-right" else f"{literal} %xo")
            for k, literal in enumerate(VALUE_CLASSES)]
        for k, operands in written:
            p.lines.append(f"%y{k} = {op} {operands}")
            p.gradient(f"d{k}", f"%y{k}", "%wv", "%xo", other.shape)
        found.append(Enumerated(f"{op}/{kind}", op, p.text(), p.buffers, (
            f"{about} with its operand twice, at every value class" if kind == "same" else
            f"{about} with a literal of each of {len(VALUE_CLASSES)} value classes on the "
            f"{kind.split('-')[1]}, the other operand loaded, of every class")
            + f", and {g_said}"))
    return found


def where_cases() -> list[Enumerated]:
    """where's rule: g of every class to the selected side and 0.0 to the other: `loaded`
    (the condition and both sides loaded), `literal-condition` (true and false, each side the
    same loaded operand) and `literal-value` (each class as a literal on either side, with a
    literal condition of each truth)."""
    found = []
    p = _Program()
    a, b, g = _grid(VALUE_CLASSES, VALUE_CLASSES, G_CLASSES)
    p.lines += [f"%xa = load {p.buffer('a', a)}", f"%xb = load {p.buffer('b', b)}",
                f"%wv = load {p.buffer('w', g)}",
                f"%cv = load {p.buffer('c', np.arange(a.size) % 2 == 0)}",
                "%y = where %cv %xa %xb"]
    p.gradient("da", "%y", "%wv", "%xa", a.shape)
    p.gradient("db", "%y", "%wv", "%xb", a.shape)
    found.append(Enumerated("where/loaded", "where", p.text(), p.buffers, (
        "the rule of where, the condition true and false, each side of every value class, "
        f"with g of each of {len(G_CLASSES)} classes")))
    for kind in ("literal-condition", "literal-value"):
        p = _Program()
        other, g = _grid(VALUE_CLASSES, G_CLASSES)
        p.lines += [f"%xo = load {p.buffer('o', other)}", f"%wv = load {p.buffer('w', g)}"]
        for truth in ("true", "false"):
            written = [("", "%xo %xo")] if kind == "literal-condition" else [
                (f"{side}{k}", f"%xo {literal}" if side == "r" else f"{literal} %xo")
                for k, literal in enumerate(VALUE_CLASSES) for side in "rl"]
            for k, operands in written:
                p.lines.append(f"%y{truth}{k} = where {truth} {operands}")
                p.gradient(f"d{truth}{k}", f"%y{truth}{k}", "%wv", "%xo", other.shape)
        found.append(Enumerated(f"where/{kind}", "where", p.text(), p.buffers, (
            "the rule of where with a literal condition of each truth, "
            + ("the same loaded operand on both sides" if kind == "literal-condition" else
               f"a literal of each of {len(VALUE_CLASSES)} value classes on either side")
            + f", and g of each of {len(G_CLASSES)} classes")))
    return found


def reduce_case(op: str) -> Enumerated:
    """reduce op=OP's rule over rows of two elements of every pair of classes (a tie, a NaN,
    both zeros of a row: reduce max's count and its shares), each row's g of every class;
    over the first axis and over the last."""
    p = _Program()
    first, second, g = _grid(VALUE_CLASSES, VALUE_CLASSES, G_CLASSES)
    rows = np.stack([first, second], axis=1)  # [n, 2]: a row per combination
    x = p.buffer("x", rows)
    w = p.buffer("w", g.reshape(-1, 1))
    wt = p.buffer("wt", g.reshape(1, -1))
    p.lines += [f"%xv = load {x}", f"%wv = load {w}", f"%wtv = load {wt}",
                f"%xt = reshape %xv shape=[2, {rows.shape[0]}]",
                f"%r = reduce %xv op={op} axis=[1]", f"%rt = reduce %xt op={op} axis=[0]"]
    p.gradient("rows", "%r", "%wv", "%xv", rows.shape)
    p.gradient("columns", "%rt", "%wtv", "%xv", rows.shape)
    return Enumerated(f"reduce.{op}/rows", "reduce", p.text(), p.buffers, (
        f"the rule of reduce op={op} over rows of every pair of {len(VALUE_CLASSES)} value "
        f"classes, with g of each of {len(G_CLASSES)} classes, over the last axis and the "
        "first"))


def enumerated_cases() -> list[Enumerated]:
    """Every enumerated case: each value rule's, where's, and reduce's (add and max)."""
    return [*(c for op in enumerated_ops() for c in rule_cases(op)), *where_cases(),
            *(reduce_case(row.split(".")[1]) for row in RULES if row.startswith("reduce."))]
