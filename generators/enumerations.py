"""Bounded-exhaustive cases, enumerated from the tables rather than drawn: every value class at
every operand position of every rule, as a loaded operand and as a literal, with the incoming
gradient g of every class: the op's value, its first derivative and its second; every pair
of statements the spec makes one node or two; every rejection in every disguise.
docs/generators.md, "Enumerations"; the checks are conformance/checks/test_enumerated.py.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from gradient_conformance.generators.writer import shape_text
from gradient_conformance.reference import conditions, exact
from gradient_conformance.reference.interp import NUMPY_DTYPES
from gradient_conformance.reference.ops import OPS, REDUCE_OPS
from gradient_conformance.reference.rules import RULES

# The classes of f32 value a rule treats apart, and of the incoming gradient g, each written
# as the literal that is one: the condition model's (reference/conditions.py, VALUE_CLASSES
# and G_CLASSES), whose products these programs take by construction. A pair of equal
# classes is a tie.
VALUE_CLASSES = tuple(conditions.VALUE_CLASSES.values())
G_CLASSES = tuple(conditions.G_CLASSES.values())
I32_CLASSES = conditions.I32_CLASSES



# What writes a case's program of a list of combinations: its text, its initial buffers,
# and the outputs each written for one combination alone (slot -> combination).
Write = Callable[[Sequence[tuple[str, ...]]], tuple[str, dict, dict]]


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


@dataclass(frozen=True)
class Enumerated:
    """One enumerated case: its name, the op whose rule it is about, what it holds in words,
    its combinations (`rows`: one tuple of class literals per element), and `write`, which
    makes the program and its initial buffers (slot -> array) of any list of combinations.
    Every output's first axis is the combination's, so the case `narrowed` to the
    combinations at which an implementation differs is the same program, of those alone."""

    name: str
    op: str
    description: str
    rows: tuple[tuple[str, ...], ...]
    write: Write = field(repr=False)

    @cached_property
    def _written(self) -> tuple[str, dict, dict]:
        return self.write(self.rows)

    @property
    def source(self) -> str:
        return self._written[0]

    @property
    def buffers(self) -> dict:
        """The initial buffers: a fresh copy each time (a run may write into them)."""
        return {slot: values.copy() for slot, values in self._written[1].items()}

    def combinations_of(self, differing: Iterable[tuple[int, int]]) -> list[int]:
        """The combinations (indices into `rows`) of the output elements `differing`, each a
        (slot, flat index): an output written for one combination alone is that one's;
        every other output's first axis runs over the combinations."""
        _, written, owners = self._written
        found = set()
        for slot, index in differing:
            values = written.get(slot)
            if slot in owners:
                found.add(owners[slot])
            elif values is not None and values.size:
                found.add(index // (values.size // len(self.rows)))
        return sorted(k for k in found if 0 <= k < len(self.rows))

    def narrowed(self, combinations: Iterable[int]) -> Enumerated:
        """The same case, of the combinations `combinations` (indices into `rows`) alone."""
        kept = tuple(self.rows[k] for k in combinations)
        said = ", ".join("(" + ", ".join(row) + ")" for row in kept[:4])
        return replace(self, rows=kept, description=(
            f"{self.description}; narrowed to {len(kept)} of its {len(self.rows)} "
            f"combinations: {said}{', ...' if len(kept) > 4 else ''}"))


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
        self.row: int | None = None  # the combination whose outputs are being written
        self.owners: dict[int, int] = {}  # output slot -> its combination, when one's alone

    def buffer(self, name: str, values: np.ndarray) -> str:
        slot = len(self.buffers)
        self.declared.append(f"%{name} = buffer slot={slot} dtype={_DTYPE[values.dtype.kind]} "
                             f"shape=[{', '.join(map(str, values.shape))}]")
        self.buffers[slot] = values
        return f"%{name}"

    def output(self, name: str, value: str, shape: tuple[int, ...],
               dtype: type = np.float32) -> None:
        declared = self.buffer(f"out_{name}", np.zeros(shape, dtype))
        if self.row is not None:
            self.owners[len(self.buffers) - 1] = self.row
        self.lines.append(f"store {declared} {value}")

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

    def written(self) -> tuple[str, dict, dict]:
        return "\n".join(self.declared + self.lines) + "\n", self.buffers, self.owners


_DTYPE = {"f": "f32", "i": "i32", "b": "bool"}


def _grid(*columns: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Every combination of the columns' classes: a row each."""
    return tuple(itertools.product(*columns))


def _vectors(rows: Sequence[tuple[str, ...]]) -> list[np.ndarray]:
    """The rows' columns, each a vector: f32 of the literals, bool of "true" and "false"."""
    columns = list(zip(*rows, strict=True)) if rows else []
    return [np.array([t == "true" for t in column]) if column[0] in _TRUTHS else _f32(column)
            for column in columns]


_TRUTHS = ("true", "false")


def _unary(op: str, second: bool) -> Write:
    def write(rows):
        p = _Program()
        a, g = _vectors(rows)
        p.lines += [f"%xa = load {p.buffer('a', a)}", f"%wv = load {p.buffer('w', g)}",
                    f"%y = {op} %xa"]
        if not second:
            p.output("y", "%y", a.shape)  # the op's own value at every class: the forward
        first = p.gradient("da", "%y", "%wv", "%xa", a.shape, stored=not second)
        if second:
            p.gradient("dda", first, "%wv", "%xa", a.shape)
        return p.written()
    return write


def _binary(op: str, second: bool) -> Write:
    def write(rows):
        p = _Program()
        a, b, g = _vectors(rows)
        p.lines += [f"%xa = load {p.buffer('a', a)}", f"%xb = load {p.buffer('b', b)}",
                    f"%wv = load {p.buffer('w', g)}", f"%y = {op} %xa %xb"]
        if not second:
            p.output("y", "%y", a.shape)  # the op's own value at every pair: the forward
        da = p.gradient("da", "%y", "%wv", "%xa", a.shape, stored=not second)
        db = p.gradient("db", "%y", "%wv", "%xb", a.shape, stored=not second)
        if second:
            p.gradient("dda", da, "%wv", "%xa", a.shape)
            p.gradient("ddb", db, "%wv", "%xb", a.shape)
            p.gradient("dab", da, "%wv", "%xb", a.shape)
        return p.written()
    return write


def _with_literals(op: str, kind: str) -> Write:
    """`op` with its operand twice (`same`), or with each class as a literal on one side
    (`literal-right`, `literal-left`; where's sides both, under a literal condition of each
    truth, when `op` is where: `literal-condition`, `literal-value`)."""
    def write(rows):
        p = _Program()
        other, g = _vectors(rows)
        p.lines += [f"%xo = load {p.buffer('o', other)}", f"%wv = load {p.buffer('w', g)}"]
        conditions = ("true ", "false ") if op == "where" else ("",)
        for condition in conditions:
            if kind in ("same", "literal-condition"):
                written = [("", "%xo %xo")]
            else:
                sides = "rl" if kind == "literal-value" else kind.split("-")[1][0]
                written = [(f"{side}{k}", f"%xo {literal}" if side == "r" else f"{literal} %xo")
                           for k, literal in enumerate(VALUE_CLASSES) for side in sides]
            for k, operands in written:
                name = f"{condition.strip()}{k}"
                p.lines.append(f"%y{name} = {op} {condition}{operands}")
                p.gradient(f"d{name}", f"%y{name}", "%wv", "%xo", other.shape)
        return p.written()
    return write


def rule_cases(op: str) -> list[Enumerated]:
    """`op`'s rule at every value class of each operand and of g, a program for each kind of
    operand: `loaded`, both operands loaded over every pair of classes (a tie on the
    diagonal), the op's value stored too; `second`, the gradient of that gradient; `same`,
    the operand twice; `literal-right` and `literal-left`, each class as a literal on that
    side. A unary op: its operand over every class, and the second derivative."""
    about = f"the rule of {op}"
    g_said = f"g of each of {len(G_CLASSES)} classes"
    if OPS[op].arity == 1:
        return [Enumerated(f"{op}/{'second' if second else 'loaded'}", op,
                           f"{about} at each of {len(VALUE_CLASSES)} value classes, with "
                           f"{g_said}" + ("; its second derivative" if second else ""),
                           _grid(VALUE_CLASSES, G_CLASSES), _unary(op, second))
                for second in (False, True)]
    found = [Enumerated(f"{op}/{kind}", op, (
        f"{about} at every pair of {len(VALUE_CLASSES)} value classes (ties on the "
        f"diagonal), with {g_said}" + ("; its second derivatives" if kind == "second" else "")),
        _grid(VALUE_CLASSES, VALUE_CLASSES, G_CLASSES), _binary(op, kind == "second"))
        for kind in ("loaded", "second")]
    for kind in ("same", "literal-right", "literal-left"):
        found.append(Enumerated(f"{op}/{kind}", op, (
            f"{about} with its operand twice, at every value class" if kind == "same" else
            f"{about} with a literal of each of {len(VALUE_CLASSES)} value classes on the "
            f"{kind.split('-')[1]}, the other operand loaded, of every class")
            + f", and {g_said}", _grid(VALUE_CLASSES, G_CLASSES), _with_literals(op, kind)))
    return found


def _where_loaded(rows):
    p = _Program()
    a, b, g, c = _vectors(rows)
    p.lines += [f"%xa = load {p.buffer('a', a)}", f"%xb = load {p.buffer('b', b)}",
                f"%wv = load {p.buffer('w', g)}", f"%cv = load {p.buffer('c', c)}",
                "%y = where %cv %xa %xb"]
    p.gradient("da", "%y", "%wv", "%xa", a.shape)
    p.gradient("db", "%y", "%wv", "%xb", a.shape)
    return p.written()


def where_cases() -> list[Enumerated]:
    """where's rule: g of every class to the selected side and 0.0 to the other: `loaded`
    (the condition of each truth and both sides loaded), `literal-condition` (true and
    false, each side the same loaded operand) and `literal-value` (each class as a literal
    on either side, with a literal condition of each truth)."""
    found = [Enumerated("where/loaded", "where", (
        "the rule of where, the condition true and false, each side of every value class, "
        f"with g of each of {len(G_CLASSES)} classes"),
        _grid(VALUE_CLASSES, VALUE_CLASSES, G_CLASSES, _TRUTHS), _where_loaded)]
    for kind in ("literal-condition", "literal-value"):
        found.append(Enumerated(f"where/{kind}", "where", (
            "the rule of where with a literal condition of each truth, "
            + ("the same loaded operand on both sides" if kind == "literal-condition" else
               f"a literal of each of {len(VALUE_CLASSES)} value classes on either side")
            + f", and g of each of {len(G_CLASSES)} classes"),
            _grid(VALUE_CLASSES, G_CLASSES), _with_literals("where", kind)))
    return found


def _reduce(op: str) -> Write:
    def write(rows):
        p = _Program()
        first, second, g = _vectors(rows)
        pairs = np.stack([first, second], axis=1)  # [n, 2]: a row per combination
        x = p.buffer("x", pairs)
        w = p.buffer("w", g.reshape(-1, 1))
        wt = p.buffer("wt", g.reshape(1, -1))
        p.lines += [f"%xv = load {x}", f"%wv = load {w}", f"%wtv = load {wt}",
                    f"%xt = reshape %xv shape=[2, {pairs.shape[0]}]",
                    f"%r = reduce %xv op={op} axis=[1]", f"%rt = reduce %xt op={op} axis=[0]"]
        p.gradient("rows", "%r", "%wv", "%xv", pairs.shape)
        p.gradient("columns", "%rt", "%wtv", "%xv", pairs.shape)
        return p.written()
    return write


def reduce_case(op: str) -> Enumerated:
    """reduce op=OP's rule over rows of two elements of every pair of classes (a tie, a NaN,
    both zeros of a row: reduce max's count and its shares), each row's g of every class;
    over the last axis, and over the first of the same elements reshaped to [2, n] (whose
    columns pair elements of two combinations; narrowed to one, its own two)."""
    return Enumerated(f"reduce.{op}/rows", "reduce", (
        f"the rule of reduce op={op} over rows of every pair of {len(VALUE_CLASSES)} value "
        f"classes, with g of each of {len(G_CLASSES)} classes, over the last axis and the "
        "first"), _grid(VALUE_CLASSES, VALUE_CLASSES, G_CLASSES), _reduce(op))


# Identity (SPEC.md, "Hash consing"): pairs of statements, P and Q, that the spec makes one
# node or two, each written in another way the grammar allows. A program holds a row per
# pair: loss = sum(P * 0.7 + Q * -1.3), and its gradients against P and against Q, which are
# both 0.7 + -1.3 when P and Q are one node and 0.7 and -1.3 when they are two. Each row:
# (P's name, P's statement, lines between, Q's name, Q's statement). The reference decides
# which they are; `tests/test_enumerations.py` holds that it decides as the spec says.
_ORDERS = (("add %x %z", "add %z %x"), ("mul %x %z", "mul %z %x"), ("max %x %z", "max %z %x"),
           ("mul %x 2.0", "mul 2.0 %x"), ("max %x 0.0", "max 0.0 %x"),
           ("max %x 0.0", "max %x -0.0"), ("mul %x 0.0", "mul %x -0.0"))
_ATTRIBUTES = (*((f"reduce %xm op={op} axis=[1]", f"reduce %xm axis=[1] op={op}")
                  for op in ("add", "max")),
               ("reduce %xm op=add axis=[1]", "reduce %xm op=max axis=[1]"))
_LOADS = (("load %in", "", "load %in"), ("load %in", "store %oth %z", "load %in"),
          ("load %in", "store %in %z", "load %in"), ("load %in", "store %in %x", "load %in"),
          ("load %in", "%e{k} = load %in 1", "load %in"))
_CALLS = (("call @f %x %z", "call @f %x %z"), ("call @f %x %z", "call @g %x %z"),
          ("call @f %x %z", "call @f %z %x"), ("call @f %x %z", "call @h %x %z"))
# Names the grammar allows ('%' [A-Za-z_][A-Za-z0-9_.]*) that differ only in a dot, an
# underscore, a letter's case or a trailing dot: two values, or one written twice.
_NAMES = (("%t1", "%t.1"), ("%t1", "%t_1"), ("%t.1", "%t_1"), ("%t1", "%T1"), ("%t1.", "%t1"),
          ("%a.b", "%a_b"), ("%_", "%__"), ("%t.1.2", "%t.12"))
# Each body's names its own, so that no expectation rests on how bodies' names are scoped;
# each body holds an indented comment line, which is no statement.
_FUNCTIONS = tuple(line for f, op in (("f", "mul"), ("g", "mul"), ("h", "add")) for line in (
    f"def @{f} %p{f} %q{f}", f"  # @{f}'s body", f"  %r{f} = {op} %p{f} %q{f}",
    f"  return %r{f}", f"end @{f}"))
# What the text form ignores (SPEC.md, "Text form": comments, blank lines, indentation),
# between two statements that are one node or two: a comment line indented (by spaces or a
# tab, in a range body or not), a blank line, a trailing comment, a comment that reads like a
# statement of Q's name, and literals at the ends of f32 in other spellings.
_TEXT = (("mul %x 2.0", "  # an indented comment line", "mul %x 2.0"),
         ("mul %x 2.0", "\t# a comment indented by a tab", "mul %x 3.0"),
         ("mul %x 2.0", "\n", "mul %x 2.0  # a trailing comment"),
         ("mul %x 2.0", "%i{k} = range 2\n    # a comment in a range body\nend %i{k}",
          "mul %x 2.0"),
         ("mul %x 2.0", "# %r{k}q = mul %x 2.0", "mul %x 3.0"),
         ("mul %x 3.4028235e38", "", "mul %x 340282346638528859811704183485995896832.0"),
         ("mul %x 1e-45", "  # the smallest subnormal", "mul %x 1.401298464324817e-45"),
         ("mul %x -3.4028235e38", "", "mul %x -3.4028234663852886e+38"))


# What x's gradient is when x received nothing (gradient.md: the zeros of x's shape, `0.0`
# or `expand 0.0 shape=S`), a node like any other: one with an `expand 0.0` of that shape
# written in the program, and with another such gradient; two with `expand -0.0`. %lz does
# not depend on %x, and %ld reaches it only through a detach.
_ZEROS = (("gradient %lz %x", "", "expand 0.0 shape=[3]"),
          ("expand 0.0 shape=[3]", "", "gradient %lz %x"),
          ("gradient %lz %x", "", "expand -0.0 shape=[3]"),
          ("gradient %ld %x", "", "expand 0.0 shape=[3]"),
          ("gradient %lz %x", "", "gradient %ld %x"))
_ZERO_LOSSES = ("%lz = reduce %z op=add", "%dx = detach %x", "%ld = reduce %dx op=add")


def _spellings(text: str) -> list[str]:
    """Other spellings of the f32 literal `text` with its bits: the generators' respellings
    (2.0 as 2., 2e0, ...) and the exact decimal of its value (1e-45 as
    1.401298464324817e-45), which rounds back to it."""
    from gradient_conformance.generators.writer import respellings
    found = respellings(text)
    bits = exact.f32_from_text(text)
    if text not in ("inf", "-inf", "nan"):
        decimal = repr(exact.decode(bits))
        if decimal not in found and decimal != text and exact.f32_from_text(decimal) == bits:
            found.append(decimal)
    return found


def _past_midpoints() -> list[tuple[str, str]]:
    """Pairs (a, d): an f32 literal a of even mantissa, and a decimal d just past the midpoint
    between a and the next f32 away from zero, which rounds to that next f32 (SPEC.md: the
    decimal rounded to the nearest f32), though read as a binary64 first (the midpoint
    itself) it would tie to even, back to a: two nodes, or one for a reader that rounds
    twice. At 1.0, -1.0 and 0.0 (whose next is the smallest subnormal)."""
    from decimal import Decimal, localcontext
    found = []
    for a in ("1.0", "-1.0", "0.0"):
        bits = exact.f32_from_text(a)
        value, after = exact.decode(bits), exact.decode(bits + 1)
        if a.startswith("-"):
            value, after = exact.decode(bits), -exact.decode((bits & 0x7FFFFFFF) + 1)
        with localcontext() as context:
            context.prec = 400  # exact: both are dyadic, of fewer than 160 digits
            midpoint = (Decimal(value) + Decimal(after)) / 2
        decimal = f"{midpoint:f}" + ("" if "." in f"{midpoint:f}" else ".") + "0000001"
        if a == "0.0":
            decimal = f"{midpoint:e}".replace("e", "000001e")
        found.append((a, decimal))
    return found


def identity_rows(group: str) -> tuple[tuple[str, ...], ...]:
    """The rows of an identity group (`_identity`): `literals`, each literal class and the
    generators' literals in every other spelling of its bits, on either side; `order`,
    operands in the other order and the zeros; `attributes`, in either order; `loads`, a
    buffer loaded twice with nothing, a store to another buffer, a store to it, or a load
    of one element between; `calls`, the same call twice, another function with the same
    body, the operands swapped; `names`, names that differ only in punctuation or case,
    holding two values and one; `text`, what the text form ignores between them (`_TEXT`);
    `zeros`, the gradient of an x that received nothing beside the zeros it is (`_ZEROS`)."""
    from gradient_conformance.generators.writer import F32_LITERALS
    if group == "literals":
        classes = dict.fromkeys(VALUE_CLASSES + F32_LITERALS)
        return tuple(("%p", f"mul %x {t}" if right else f"mul {t} %x", "",
                      "%q", f"mul %x {r}" if right else f"mul {r} %x")
                     for t in classes for r in _spellings(t) for right in (True, False)) + \
            tuple(("%p", f"mul %x {t}", "", "%q", f"mul %x {r}") for t, r in _past_midpoints())
    if group == "order":
        return tuple(("%p", a, "", "%q", b) for a, b in _ORDERS)
    if group == "attributes":
        return tuple(("%p", a, "", "%q", b) for a, b in _ATTRIBUTES)
    if group == "loads":
        return tuple(("%p", a, between, "%q", b) for a, between, b in _LOADS)
    if group == "calls":
        return tuple(("%p", a, "", "%q", b) for a, b in _CALLS)
    if group == "text":
        return tuple(("%p", a, between, "%q", b) for a, between, b in _TEXT)
    if group == "zeros":
        return tuple(("%p", a, between, "%q", b) for a, between, b in _ZEROS)
    return tuple((pn, first, "", qn, second) for pn, qn in _NAMES
                 for first, second in (("mul %x 2.0", "mul %x 3.0"),
                                       ("mul %x 2.0", "mul %x 2.0")))


IDENTITY_GROUPS = ("literals", "order", "attributes", "loads", "calls", "names", "text",
                   "zeros")


def _identity(rows):
    p = _Program()
    if any("call" in row[1] + row[4] for row in rows):
        p.declared += _FUNCTIONS
    x = p.buffer("in", np.array([0.75, -1.5, 3.0], np.float32))
    z = p.buffer("oth", np.array([2.0, -0.5, 1.25], np.float32))
    m = p.buffer("mat", np.array([[0.5, -2.0], [1.5, 1.5], [-0.25, 4.0]], np.float32))
    p.lines += [f"%x = load {x}", f"%z = load {z}", f"%xm = load {m}"]
    if any("gradient" in row[1] + row[4] for row in rows):
        p.lines += _ZERO_LOSSES
    for k, (p_name, first, between, q_name, second) in enumerate(rows):
        p.row = k
        # Each row's names apart from the others' by a prefix, so that a trailing dot stays
        # trailing: %t1. and %t1 are %r3t1. and %r3t1.
        pn, qn = f"%r{k}{p_name[1:]}", f"%r{k}{q_name[1:]}"
        p.lines.append(f"{pn} = {first}")
        p.lines += [line.format(k=k) for line in between.split("\n")] if between else []
        p.lines += [f"{qn} = {second}", f"%mp_{k} = mul {pn} 0.7", f"%mq_{k} = mul {qn} -1.3",
                    f"%s_{k} = add %mp_{k} %mq_{k}", f"%l_{k} = reduce %s_{k} op=add",
                    f"%gp_{k} = gradient %l_{k} {pn}", f"%gq_{k} = gradient %l_{k} {qn}"]
        shape = (3, 1) if first.startswith("reduce") else (3,)  # a reduce keeps its axes
        p.output(f"p_{k}", f"%gp_{k}", shape)
        p.output(f"q_{k}", f"%gq_{k}", shape)
    p.row = None
    return p.written()


def identity_cases() -> list[Enumerated]:
    """A program per identity group (`identity_rows`), a row per pair."""
    return [Enumerated(f"identity/{group}", "hash consing", (
        f"identity: {group}, pairs of statements that are one node or two by the spec's "
        "hash consing, each with its gradient against both"),
        identity_rows(group), _identity) for group in IDENTITY_GROUPS]


def _minimal_draw(strategy):
    """A draw that takes every choice's first option: the writer's choices are bounded
    integers (generators/choices.py, unpacked), each shrinking towards its lower bound, so
    this writes the simplest program of a family, as Hypothesis's shrink target would be."""
    while not hasattr(strategy, "start") and hasattr(strategy, "wrapped_strategy"):
        strategy = strategy.wrapped_strategy
    start = getattr(strategy, "start", None)
    if start is None:
        raise TypeError(f"a choice the minimal draw cannot take: {strategy!r}")
    return start


def _rejection(rule: str, kind: str, shape: tuple[int, ...]) -> Write:
    def write(rows):
        from gradient_conformance.generators.rejections import DISGUISES
        from gradient_conformance.generators.writer import Writer
        w = Writer(_minimal_draw, prune=False)
        w.input("f32", shape)
        x = w.pick("f32", shape, literal_ok=False)
        y, target, _ = DISGUISES[rule][0](w, shape, x, kind)
        if y is not None:
            w.line(f"%g = gradient {y.text} {target.text}")
        return _zeroed(w.program()[0])
    return write


def _near_miss(make, shape: tuple[int, ...]) -> Write:
    def write(rows):
        from gradient_conformance.generators.writer import Writer
        w = Writer(_minimal_draw, prune=False)
        x, other = w.input("f32", shape), w.input("f32", shape)
        y, target, _ = make(w, shape, x, other)
        if y is not None:
            w.store(w.gradient(y, target))
        return _zeroed(w.program()[0])
    return write


def _zeroed(source: str) -> tuple[str, dict, dict]:
    """A program with every buffer 0.75 (or 1, or true): what it is about is its status."""
    from gradient_conformance.reference.cases import slots_of
    from gradient_conformance.reference.syntax import parse
    values = {"f32": 0.75, "i32": 1, "bool": True}
    types = {"f32": np.float32, "i32": np.int32, "bool": np.bool_}
    buffers: dict[int, np.ndarray] = {slot: np.full(shape, values[dtype], types[dtype])
                                      for slot, (dtype, shape) in slots_of(parse(source)).items()}
    return source, buffers, {}


def rejection_cases() -> list[Enumerated]:
    """Every rejection rule (reference/errors.py, RULES) in every disguise the generators
    know (generators/rejections.py, DISGUISES: directly, through a call, a store and a load,
    a detach, a cast, a range, a reduce op=mul with and without its axes), and every near
    miss that must be accepted, each written as its simplest program, over a scalar and over
    a vector: a new rule or disguise gets its cases with no code here."""
    from gradient_conformance.generators.rejections import DISGUISES, NEAR_MISSES
    from gradient_conformance.reference import errors
    found = []
    for shape in ((), (3,)):
        said = f"over {'a scalar' if not shape else 'a vector'}"
        for rule in errors.RULES:
            for kind in DISGUISES[rule][1]:
                found.append(Enumerated(
                    f"rejection/{rule}/{kind.replace(' ', '-').replace('=', '')}/{len(shape)}",
                    "gradient",
                    f"rejected by [{rule}]: {kind}, {said}", ((),), _rejection(rule, kind, shape)))
        for make in NEAR_MISSES:
            found.append(Enumerated(
                f"near-miss/{make.__name__.strip('_')}/{len(shape)}", "gradient",
                f"a near miss, accepted: {make.__name__.strip('_').replace('_', ' ')}, {said}",
                ((),), _near_miss(make, shape)))
    return found


def enumerated_cases() -> list[Enumerated]:
    """Every enumerated case: each value rule's, where's, and reduce's (add and max), the
    structural ops' gradients at every shape class (`structure_cases`), and each op's
    forward value at every class of every dtype past f32 and every shape class
    (`forward_cases`)."""
    return [*(c for op in enumerated_ops() for c in rule_cases(op)), *where_cases(),
            *(reduce_case(row.split(".")[1]) for row in RULES if row.startswith("reduce.")),
            *structure_cases(gradients=True), *forward_cases()]


# --- past f32: every op's value at every class of each dtype it takes ----------------------

CLASSES = {"i32": I32_CLASSES, "bool": _TRUTHS, "f32": VALUE_CLASSES}


def _column(dtype: str, texts) -> np.ndarray:
    if dtype == "bool":
        return np.array([t == "true" for t in texts])
    if dtype == "i32":
        return np.array([int(t) for t in texts], np.int32)
    return _f32(texts)


def _traps(op: str, a: str, b: str) -> bool:
    """Whether `op a b` is a run an implementation that declares integer division traps is
    not sent (SPEC.md, "The protocol"): a divisor of zero, or -2^31 over -1."""
    return op in ("idiv", "mod") and (b == "0" or (a == "-2147483648" and b == "-1"))


def _forward_binary(op: str, dtype: str, kind: str) -> Write:
    """`op` over `dtype`: `loaded` (both operands loaded, every pair of classes, a row
    each), `same` (the operand twice), `literal-right` and `literal-left` (each class a
    literal on that side of the loaded one); every result stored."""
    result = OPS[op].result or dtype

    def write(rows):
        p = _Program()
        if kind == "loaded":
            a, b = (_column(dtype, c) for c in zip(*rows, strict=True))
            p.lines += [f"%xa = load {p.buffer('a', a)}", f"%xb = load {p.buffer('b', b)}",
                        f"%y = {op} %xa %xb"]
            p.output("y", "%y", a.shape, NUMPY_DTYPES[result])
            return p.written()
        other = _column(dtype, [row[0] for row in rows])
        p.lines.append(f"%xo = load {p.buffer('o', other)}")
        if kind == "same":
            p.lines.append(f"%y = {op} %xo %xo")
            p.output("y", "%y", other.shape, NUMPY_DTYPES[result])
            return p.written()
        for k, literal in enumerate(CLASSES[dtype]):
            if any(_traps(op, row[0], literal) if kind == "literal-right" else
                   _traps(op, literal, row[0]) for row in rows):
                continue  # taken by the loaded case's trapping rows
            operands = f"%xo {literal}" if kind == "literal-right" else f"{literal} %xo"
            p.lines.append(f"%y{k} = {op} {operands}")
            p.output(f"y{k}", f"%y{k}", other.shape, NUMPY_DTYPES[result])
        return p.written()
    return write


def _forward_cast(op: str, source: str, target: str, literal: bool) -> Write:
    """`op` (cast or bitcast) from `source` to `target`: of a loaded vector of every class,
    or of each class as a literal (a scalar each), every result stored."""
    def write(rows):
        p = _Program()
        if literal:
            for k, (text,) in enumerate(rows):
                p.row = k
                p.lines.append(f"%y{k} = {op} {text} dtype={target}")
                p.output(f"y{k}", f"%y{k}", (), NUMPY_DTYPES[target])
            p.row = None
            return p.written()
        x = _column(source, [row[0] for row in rows])
        p.lines += [f"%xv = load {p.buffer('in', x)}", f"%y = {op} %xv dtype={target}"]
        p.output("y", "%y", x.shape, NUMPY_DTYPES[target])
        return p.written()
    return write


# How many copies an expand makes that a reduce op=add then sums: a left fold of n copies
# of v rounds at each add, one multiplication by n rounds once, and numpy's pairwise sum
# (from 8) otherwise again; each count from 2 to 9, and 16 and 17 past two blocks of eight.
EXPANDED_COUNTS = (2, 3, 4, 5, 6, 7, 8, 9, 16, 17)


def _expanded_sum(n: int) -> Write:
    """Each f32 class, expanded to n copies along a new axis and summed over it again."""
    def write(rows):
        p = _Program()
        x = _f32([row[0] for row in rows])
        r = len(rows)
        p.lines += [f"%xv = load {p.buffer('in', x)}", f"%xr = reshape %xv shape=[{r},1]",
                    f"%xe = expand %xr shape=[{r},{n}]", "%y = reduce %xe op=add axis=[1]"]
        p.output("y", "%y", (r, 1))
        return p.written()
    return write


def forward_cases() -> list[Enumerated]:
    """Every op on i32 and bool (OPS' dtypes), at every pair of classes loaded (the
    trapping pairs of idiv and mod a case of their own, which an implementation that traps
    is not sent), its operand twice, and each class a literal on either side; every cast
    from every class of each dtype to each other, loaded and as a literal (folded when the
    program is built, where a computed one is not); every bitcast between f32 and i32; every
    f32 class expanded to each of EXPANDED_COUNTS copies and summed over them again."""
    found = []
    for name, op in OPS.items():
        if op.arity != 2 or op.attributes:
            continue
        # f32 where no rule's enumeration stores the op's value already (cmplt, cmpne)
        for dtype in (d for d in op.dtypes if d != "f32" or name not in RULES):
            classes = CLASSES[dtype]
            pairs = _grid(classes, classes)
            about = f"{name} on {dtype}, forward"
            safe = tuple(r for r in pairs if not _traps(name, *r))
            found.append(Enumerated(f"{name}.{dtype}/loaded", name, (
                f"{about}: every pair of {len(classes)} {dtype} classes, loaded"), safe,
                _forward_binary(name, dtype, "loaded")))
            trapping = tuple(r for r in pairs if _traps(name, *r))
            if trapping:
                found.append(Enumerated(f"{name}.{dtype}/traps", name, (
                    f"{about}: a divisor of zero and -2^31 over -1, loaded"), trapping,
                    _forward_binary(name, dtype, "loaded")))
            for kind in ("same", "literal-right", "literal-left"):
                # The loaded column's classes a trapping pair needs are the traps case's:
                # a divisor of zero (x over itself), and of -1 under a literal -2^31.
                rows = tuple((t,) for t in classes if not (
                    (kind == "same" and _traps(name, t, t)) or
                    (kind == "literal-left" and any(_traps(name, a, t) for a in classes))))
                found.append(Enumerated(f"{name}.{dtype}/{kind}", name, (
                    f"{about}: its operand twice, at every class" if kind == "same" else
                    f"{about}: each {dtype} class a literal on the {kind.split('-')[1]}, the "
                    "other loaded, of every class"), rows, _forward_binary(name, dtype, kind)))
    for cast, dtypes in (("cast", ("f32", "i32", "bool")), ("bitcast", ("f32", "i32"))):
        for source, target in itertools.product(dtypes, dtypes):
            if source == target and cast == "bitcast":
                continue
            for literal in (False, True):
                found.append(Enumerated(
                    f"{cast}.{source}.{target}/{'literal' if literal else 'loaded'}", cast,
                    f"{cast} from every {source} class to {target}, "
                    + ("each a literal" if literal else "loaded"),
                    tuple((t,) for t in CLASSES[source]),
                    _forward_cast(cast, source, target, literal)))
    for n in EXPANDED_COUNTS:
        found.append(Enumerated(
            f"reduce.expanded/{n}", "reduce", f"every f32 class expanded to {n} copies and "
            "summed over them (a left fold of the copies, not one multiplication by "
            f"{n})", tuple((t,) for t in VALUE_CLASSES), _expanded_sum(n)))
    return [*found, *structure_cases(gradients=False)]


# --- structure: every shape class, every axis set ------------------------------------------

# Shapes of every rank from 0 to 3, with a 0-length dim and a 1-length dim where a rank
# allows: an empty value, a size-1 axis a reduce keeps and an expand widens, and ones of
# neither, as few as reach each kind (SPEC.md, "Operations": reduce, expand, reshape).
SHAPE_CLASSES = ((), (1,), (0,), (3,), (1, 3), (0, 3), (2, 0), (2, 1, 3), (0, 1, 2),
                 (2, 3, 1))


def _axis_sets(rank: int) -> list[str]:
    """Every axis= of a reduce at `rank`: none written (all of them), the empty list, and
    each nonempty set in increasing order."""
    sets = [""]
    for size in range(rank + 1):
        sets += [f"axis=[{','.join(map(str, c))}]" for c in itertools.combinations(
            range(rank), size)]
    return sets


def _reduced(shape: tuple[int, ...], axis: str) -> tuple[int, ...]:
    if not axis:
        return ()
    axes = {int(a) for a in axis[len("axis=["):-1].split(",") if a}
    return tuple(1 if k in axes else n for k, n in enumerate(shape))


def _widened(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """What an expand may make of `shape`: each size-1 dim as 0, 1 or 3 (not the shape
    itself), and of a scalar, a vector and an empty matrix."""
    if not shape:
        return [(0,), (3,), (2, 0)]
    choices = [(0, 1, 3) if n == 1 else (n,) for n in shape]
    return [t for t in itertools.product(*choices) if t != shape]


def _structure_rows(shape: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    rows = [("reduce", op, axis) for op in REDUCE_OPS for axis in _axis_sets(len(shape))]
    size = int(np.prod(shape))
    rows += [("reshape", shape_text(t), "") for t in SHAPE_CLASSES
             if t != shape and int(np.prod(t)) == size]
    rows += [("expand", shape_text(t), "") for t in _widened(shape)]
    return tuple(rows)


def _structure(shape: tuple[int, ...], gradients: bool) -> Write:
    """Each row's statement on x of `shape`, its value stored (`gradients`: the gradient of
    the sum of its value weighed by 0.75 against x, where the op has a rule)."""
    def write(rows):
        p = _Program()
        x = (np.arange(int(np.prod(shape)), dtype=np.float32) * np.float32(0.5)
             - np.float32(1.25)).reshape(shape)
        p.lines.append(f"%x = load {p.buffer('in', x)}")
        for k, (op, what, axis) in enumerate(rows):
            p.row = k
            if op == "reduce":
                statement, result = f"reduce %x op={what} {axis}".strip(), \
                    _reduced(shape, axis)
            else:
                statement = f"{op} %x shape={what}"
                result = tuple(int(n) for n in what[1:-1].split(",") if n)
            p.lines.append(f"%y{k} = {statement}")
            if not gradients:
                p.output(f"y{k}", f"%y{k}", result)
            elif not (op == "reduce" and what == "mul"):  # reduce op=mul has no rule
                p.lines += [f"%m{k} = mul %y{k} 0.75", f"%s{k} = reduce %m{k} op=add",
                            f"%g{k} = gradient %s{k} %x"]
                p.output(f"g{k}", f"%g{k}", shape)
        p.row = None
        return p.written()
    return write


def structure_cases(*, gradients: bool) -> list[Enumerated]:
    """For each shape class (`SHAPE_CLASSES`), reduce (add, max, mul) over every axis set
    (none written, the empty list, each nonempty one), reshape to every other shape class of
    its size (an empty one to every empty one), expand of each size-1 dim to 0, 1 or 3: the
    values, or (`gradients`) each one's gradient."""
    kind = "gradient" if gradients else "value"
    return [Enumerated(f"shape.{kind}/{shape_text(s)}", "reduce", (
        f"reduce, reshape and expand of a value of shape {shape_text(s)} at every axis set and "
        f"every shape it may take: each one's {kind}"), _structure_rows(s),
        _structure(s, gradients)) for s in SHAPE_CLASSES]
