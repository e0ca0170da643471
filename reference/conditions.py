"""The spec's conditions: for each op and rule, the circumstances that take another path of
the spec. docs/generators.md, "Conditions".

An op is not reached by being used once. `max` is three paths (a larger side, a tie, a NaN)
and a fourth for the signed zeros, and each again with a literal operand or the same operand
twice; a reduce over a middle axis is another index map than one over the last; a fold of
eight shares is where implementations change algorithm. `CONDITIONS` names each such path
once, as data beside the op table (ops.py), and `Reached` says which of them one case took,
measured on the oracle's own run of it: its nodes' operands and results as the interpreter
computes them, its expansions' visits and shares as the walk made them, the dependences the
builder followed, the rejection that stopped it, and the text it read. So the measure holds
for any implementation: it is the spec's paths that a case exercised, not an
implementation's.

A name is `subject.condition`; the subject is an op of OPS, a row of the rules (`rule.max`),
or one of the program-wide subjects of `SUBJECTS`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from . import errors, exact
from .gradient import between, reachable
from .graph import ATTRIBUTE_ORDER, Node, SignatureError
from .interp import reduced_rows
from .ops import FEATURES, OPS, REDUCE_OPS, elementwise, features_of_statements
from .program import Define, Loop, Program, Store, walk
from .rules import RULES, rule_key


@dataclass(frozen=True)
class Condition:
    name: str  # subject.condition
    says: str  # when it holds, in the spec's words
    kind: str  # value, operand, shape, walk, dependence, rejection, text


def _c(name: str, says: str, kind: str) -> Condition:
    return Condition(name, says, kind)


F32_UNARY = elementwise("f32", 1)
F32_BINARY = elementwise("f32", 2)
F32_COMPARISONS = elementwise("f32", 2, result="bool")
F32_OPS = F32_UNARY + F32_BINARY + F32_COMPARISONS

# Operand values that IEEE arithmetic treats apart: every f32 op meets each.
SPECIAL_OPERANDS = {
    "nan": "an operand element is NaN",
    "infinity": "an operand element is an infinity",
    "negative-zero": "an operand element is -0.0",
    "subnormal": "an operand element is subnormal",
}


# log2 of an f32 is 0 or at least 2^-24 in size, and sqrt of a subnormal at least 2^-75: no
# f32 operand gives either a subnormal result.
NEVER_SUBNORMAL = frozenset({"log2", "sqrt"})


def _per_op() -> list[Condition]:
    found = []
    for op in F32_OPS:
        for key, says in SPECIAL_OPERANDS.items():
            found.append(_c(f"{op}.{key}", says, "value"))
        found.append(_c(f"{op}.literal", "an operand is a literal (broadcast)", "operand"))
        if OPS[op].arity == 2:
            found.append(_c(f"{op}.same-operand", "both operands are one node", "operand"))
    for op in F32_UNARY + F32_BINARY:
        if op not in NEVER_SUBNORMAL:
            found.append(_c(f"{op}.subnormal-result", "a result element is subnormal",
                            "value"))
    return found


SPECIFIC = [
    _c("max.tie", "a and b are equal at some element (neither NaN)", "value"),
    _c("max.signed-zeros", "a and b are -0.0 and +0.0 at some element", "value"),
    _c("add.cancels", "a + b is a zero of nonzero operands (its sign by the rounding rule)",
       "value"),
    _c("add.zeros", "a and b are both zeros at some element", "value"),
    _c("mul.overflow", "finite operands give an infinity", "value"),
    _c("mul.underflow", "nonzero operands give a zero", "value"),
    _c("recip.zero", "the operand is a zero (recip gives an infinity of its sign)", "value"),
    _c("log2.negative", "the operand is below zero (NaN)", "value"),
    _c("sqrt.negative", "the operand is below zero (NaN)", "value"),
    _c("exp2.overflow", "the result is an infinity of a finite operand", "value"),
    _c("sin.large", "|a| is 2^20 or more, where argument reduction matters", "value"),
    _c("cmplt.equal", "a and b are equal at some element", "value"),
    _c("cmpne.equal", "a and b are equal at some element", "value"),
    _c("i32.wraps", "an i32 add or mul wraps around", "value"),
    _c("idiv.by-zero", "a divisor element is 0 (the result is 0)", "value"),
    _c("idiv.overflow", "-2^31 idiv -1 (the result is -2^31)", "value"),
    _c("idiv.signs-differ", "dividend and divisor have different signs (truncation)",
       "value"),
    _c("mod.by-zero", "a divisor element is 0 (the result is 0)", "value"),
    _c("mod.overflow", "-2^31 mod -1 (the result is 0)", "value"),
    _c("mod.negative-dividend", "a dividend element is negative (the sign it keeps)", "value"),
    _c("shl.count-outside", "a shift count outside 0..31 (taken mod 32)", "value"),
    _c("shr.count-outside", "a shift count outside 0..31 (taken mod 32)", "value"),
    _c("shr.negative", "an arithmetic shift of a negative value", "value"),
    _c("where.mixed", "the condition is true at some elements and false at others", "value"),
    _c("where.literal-condition", "the condition is a literal", "operand"),
    _c("where.literal-value", "a selected value is a literal", "operand"),
    _c("cast.f32-i32-outside", "an f32 -> i32 cast of a NaN or out-of-range value", "value"),
    _c("cast.f32-i32-fraction", "an f32 -> i32 cast truncates a fraction", "value"),
    _c("cast.i32-f32-inexact", "an i32 -> f32 cast rounds", "value"),
    _c("cast.f32-bool-nan", "an f32 -> bool cast of a NaN (true)", "value"),
    _c("bitcast.round-trip", "a bitcast of a bitcast (f32 -> i32 -> f32)", "operand"),
    _c("bitcast.to-nan", "an i32 -> f32 bitcast gives a NaN", "value"),
    _c("expand.scalar", "a scalar expanded", "shape"),
    _c("expand.one-axis", "one size-1 axis expanded", "shape"),
    _c("expand.several-axes", "several size-1 axes expanded", "shape"),
    _c("expand.middle-axis", "an axis neither first nor last expanded", "shape"),
    _c("reshape.rank-change", "a reshape to another rank", "shape"),
    _c("load.element", "a load of one element, by index", "shape"),
    _c("load.after-store", "a load reads what a store wrote", "dependence"),
    _c("load.again", "a buffer loaded again with no store to it between (one node)",
       "operand"),
    _c("store.element", "a store of one element, by index", "shape"),
    _c("store.literal", "a literal stored (broadcast)", "operand"),
    _c("range.nested", "a range inside a range", "shape"),
    _c("call.in-range", "a call inside a range body", "shape"),
    _c("shape.rank-3", "a value of rank 3", "shape"),
    _c("shape.rank-4", "a value of rank 4", "shape"),
    _c("shape.size-one-middle", "a value with a size-1 axis between larger ones", "shape"),
    _c("shape.empty", "a value with a 0-length axis (no element)", "shape"),
    _c("reduce.of-empty", "a reduce of a value with no element", "shape"),
    _c("i32.extreme-literal", "an i32 literal at an end of the range (-2^31 or 2^31-1)",
       "operand"),
]

REDUCE = [c for op in REDUCE_OPS for c in (
    _c(f"reduce.{op}.all", "no axis: every element", "shape"),
    _c(f"reduce.{op}.one-axis", "axis= one axis", "shape"),
    _c(f"reduce.{op}.several-axes", "axis= several axes, each of size > 1", "shape"),
    _c(f"reduce.{op}.middle-axis", "a reduced axis of size > 1 between two others", "shape"),
    _c(f"reduce.{op}.size-one-axis", "a reduced axis of size 1", "shape"),
    _c(f"reduce.{op}.long-row", "a row of 8 elements or more", "shape"),
)] + [
    _c("reduce.max.tie", "a row holds its maximum twice", "value"),
    _c("reduce.max.nan", "a row holds a NaN", "value"),
    _c("reduce.add.signed-zeros", "a row of zeros only, one of them -0.0", "value"),
]

# The rules (rules.py), each taken, and the paths inside the ones that branch on values.
RULE_CONDITIONS = [_c(f"rule.{key}", "a share passed through this row", "walk")
                   for key in RULES] + [
    _c("rule.max.tie", "max's share at a tie (g * 0.5 to each side)", "value"),
    _c("rule.max.nan", "max's share with a NaN operand (0.0 to each side)", "value"),
    _c("rule.max.signed-zeros", "max's share at max(-0.0, +0.0)", "value"),
    _c("rule.max.literal", "max's share where the other operand is a literal", "operand"),
    _c("rule.max.same-operand", "max a a: both shares to one node", "operand"),
    _c("rule.mul.same-operand", "mul a a: both shares to one node", "operand"),
    _c("rule.add.same-operand", "add a a: both shares to one node", "operand"),
    _c("rule.mul.literal", "mul's share where the other operand is a literal", "operand"),
    _c("rule.where.literal-condition", "where's shares with a literal condition", "operand"),
    _c("rule.reduce.max.tie", "reduce op=max's share at a row's repeated maximum", "value"),
    _c("rule.reduce.add.several-axes", "reduce op=add's share over several axes", "shape"),
    _c("rule.expand.several-axes", "expand's share summed over several axes", "shape"),
    _c("rule.subnormal", "a node a rule built computes a subnormal", "value"),
    _c("rule.zero-beside-negative-zero",
       "a rule's literal 0.0 in a program that writes -0.0 (two nodes)", "operand"),
]

WALK = [
    _c("walk.fan-in-2", "a node receives 2 to 7 shares", "walk"),
    _c("walk.fan-in-8", "a node receives 8 shares or more", "walk"),
    _c("walk.zeros", "x receives nothing: the result is zeros", "walk"),
    _c("walk.x-is-load", "x is a load", "walk"),
    _c("walk.x-built-by-gradient", "x is a node an earlier gradient built (hash consing)",
       "walk"),
    _c("walk.higher-order", "a gradient's loss or x is another gradient's result", "walk"),
    _c("walk.through-detach", "the walk descends through a detach to x's side", "walk"),
    _c("walk.in-range", "a gradient inside a range body", "walk"),
]

DEPENDENCE = [
    _c("depends.memory", "y reaches x through a store and a load", "dependence"),
    _c("depends.memory-two-hops", "y reaches x through two store-load pairs", "dependence"),
    _c("depends.detach", "y reaches x through a detach", "dependence"),
    _c("depends.i32", "y reaches x through an i32 or bool value (a cast, a comparison)",
       "dependence"),
    _c("depends.bitcast-round-trip", "y reaches x through a bitcast to i32 and back",
       "dependence"),
    _c("depends.call", "y reaches x through a call", "dependence"),
    _c("open-range.counter", "y or x uses the counter of the range the gradient is in",
       "dependence"),
    _c("open-range.load", "y or x uses a load inside the range the gradient is in",
       "dependence"),
    _c("open-range.through-detach", "y or x reaches the open range only through a detach",
       "dependence"),
]

REJECTIONS = [_c(f"rejected.{rule}", "the gradient is rejected by this rule", "rejection")
              for rule in errors.RULES] + [
    _c("rejected.no-rule.memory", "rejected: the walk meets a load reading a store",
       "rejection"),
    _c("rejected.no-rule.call", "rejected: the walk meets a call", "rejection"),
    _c("rejected.no-rule.reduce-mul", "rejected: the walk meets a reduce op=mul",
       "rejection"),
    _c("error.syntax", "a program the parser rejects", "rejection"),
    _c("error.invalid", "a program the builder rejects, other than a gradient", "rejection"),
    _c("error.index", "an index out of range at run time", "rejection"),
]

TEXT = [
    _c("text.attributes-reordered", "attributes written in another order than the printer's",
       "text"),
    _c("text.spacing", "tokens apart by more than one space, or by a tab", "text"),
    _c("text.comment", "a comment", "text"),
    _c("text.comment-line", "a line that is only a comment, indented (in a range or a "
       "function body, or not)", "text"),
    _c("text.blank-line", "a blank line between statements", "text"),
    _c("text.exponent-literal", "an f32 literal with an exponent", "text"),
    _c("text.literal-respelled", "an f32 literal spelled otherwise than the printer's", "text"),
    _c("text.attributes-both-orders",
       "one program writes attributes in the printer's order and in another", "text"),
    _c("text.literal-two-spellings", "one program writes one f32 literal two ways", "text"),
    _c("text.names-confusable",
       "two names differ only in a '.', a '_' or a letter's case (%t.1, %t_1, %T1)", "text"),
]

# Subjects that are no op of the table: statements of their own (store, range, call) and
# what a program as a whole does.
SUBJECTS = ("store", "range", "call", "shape", "rule", "walk", "depends", "open-range",
            "rejected", "error", "text", "i32")

CONDITIONS: dict[str, Condition] = {c.name: c for c in (
    _per_op() + SPECIFIC + REDUCE + RULE_CONDITIONS + WALK + DEPENDENCE + REJECTIONS + TEXT)}


# --- products, derived from the tables ----------------------------------------------------------
# The conditions above name each path once; what a conditional fault needs is a path at a class
# of value, at an operand position, with an operand of a kind, and the gradient g of a class.
# `PRODUCTS` crosses them, from the op and rules tables: a new op or row gets its products with
# no line here. `PAIRS`: two features of the IR in one program (a covering array's figure).

# The classes of f32 value a rule treats apart, by bits, each with the literal that is one
# (generators/enumerations.py writes every combination of them): both zeros, subnormals, tiny
# normals (|a| < 2^-64: a square underflows), exactly one, ordinary normals, huge values
# (|a| >= 2^64: a square overflows), infinities, NaN. An ordinary one has a full mantissa, so
# that two forms of a rule that round apart on most inputs round apart on it too.
VALUE_CLASSES: dict[str, str] = {
    "zero": "0.0", "-zero": "-0.0", "subnormal": "1e-45", "-subnormal": "-1e-45",
    "tiny": "1.1754944e-38", "-tiny": "-1.1754944e-38", "one": "1.0", "-one": "-1.0",
    "normal": "1.2345678", "-normal": "-2.7182817", "huge": "3e19", "-huge": "-3e19",
    "inf": "inf", "-inf": "-inf", "nan": "nan"}
# The classes of i32 value the ops treat apart (SPEC.md, "Operations"): zero, one and minus
# one, two and its negative, the shift counts' edges (31, 32, 33, -32), a power of two, and
# the ends of the range, each written as the literal that is one. Bool's are its two values.
I32_CLASSES = ("0", "1", "-1", "2", "-2", "31", "32", "33", "-32", "1073741824", "2147483647",
               "-2147483648")
# The classes of the gradient g reaching a rule that the products follow, each with the
# literal that is one: 1.0 (what a loss sends), negative, both zeros, NaN, subnormal, huge.
G_CLASSES: dict[str, str] = {
    "one": "1.0", "-normal": "-1.7320508", "zero": "0.0", "-zero": "-0.0", "nan": "nan",
    "subnormal": "1e-45", "huge": "3e38"}
_BOUNDS = (0x00000001, 0x00800000, 0x1F800000, 0x3F800000, 0x3F800001, 0x5F800000,
           0x7F800000, 0x7F800001)  # magnitudes' bits where the classes start
_BY_MAGNITUDE = ("zero", "subnormal", "tiny", "normal", "one", "normal", "huge", "inf", "nan")


def value_classes_of(bits) -> set[str]:
    """The VALUE_CLASSES of f32 elements given as bits (an array or a scalar)."""
    flat = np.asarray(bits, dtype=np.int64).ravel() & 0xFFFFFFFF
    magnitude, negative = flat & 0x7FFFFFFF, flat >> 31
    index = np.searchsorted(np.array(_BOUNDS), magnitude, side="right")
    found = set()
    for k, sign in set(zip(index.tolist(), negative.tolist(), strict=True)):
        name = _BY_MAGNITUDE[k]
        found.add(f"-{name}" if sign and name != "nan" else name)
    return found


OPERAND_KINDS = ("loaded", "literal", "computed", "same")


def product_rows() -> dict[str, tuple[int, ...]]:
    """The rows of RULES the products cross, each with its operand positions that carry a
    share: elementwise f32 ops' rows (every operand; where's two values, not its condition)
    and reduce's (its one operand)."""
    rows: dict[str, tuple[int, ...]] = {}
    for key in RULES:
        op = OPS[key.split(".")[0]]
        if op.computed("f32") is not None and isinstance(op.arity, int):
            rows[key] = tuple(range(op.arity))
        elif op.arity == 3:
            rows[key] = (1, 2)
        elif key.startswith("reduce."):
            rows[key] = (0,)
    return rows


_PRODUCT_ROWS = product_rows()


def _products() -> list[Condition]:
    found = []
    for row, positions in _PRODUCT_ROWS.items():
        # A rule meets the same operand twice only with two positions, and a literal only
        # beside an operand on the path: never as a unary op's or a reduce's only one.
        kinds = OPERAND_KINDS if len(positions) == 2 else ("loaded", "computed")
        for position in positions:
            for kind in kinds:
                for name in VALUE_CLASSES:
                    found.append(_c(f"product.{row}.{position}.{kind}.{name}",
                                    f"{row}'s rule, operand {position} {kind}, a {name} "
                                    "element", "product"))
        for name in G_CLASSES:
            found.append(_c(f"product.{row}.g.{name}", f"{row}'s rule with g {name} at some "
                            "element", "product"))
    return found


PRODUCTS: dict[str, Condition] = {c.name: c for c in _products()}
PAIR_FEATURES = tuple(sorted(f for f in FEATURES if ":" not in f))
PAIRS: dict[str, Condition] = {
    f"pair.{a}+{b}": _c(f"pair.{a}+{b}", f"{a} and {b} in one program", "pair")
    for a, b in itertools.combinations(PAIR_FEATURES, 2)}
# Every name a case can take: the conditions, the products and the pairs.
MEASURED: dict[str, Condition] = {**CONDITIONS, **PRODUCTS, **PAIRS}


# --- measuring one case ------------------------------------------------------------------------


def _elements(value, shape) -> Iterable:
    return np.broadcast_to(value, shape).flat


def _special(bits: int) -> Iterable[str]:
    if exact.is_nan(bits):
        yield "nan"
    elif bits & 0x7FFFFFFF == 0x7F800000:
        yield "infinity"
    elif bits == exact.NEG_ZERO:
        yield "negative-zero"
    elif exact.is_subnormal(bits):
        yield "subnormal"


def _is_zero(bits: int) -> bool:
    return bits & 0x7FFFFFFF == 0


def _finite(bits: int) -> bool:
    return bits & 0x7F800000 != 0x7F800000


class Reached:
    """The conditions one case took: `names`. Fed by the interpreter (`observe`, called
    with each node it computes, its operands' values and its result), and by `program`,
    `rejected` and `text` for what the builder and the parser saw. One per case: nothing is
    kept between cases."""

    def __init__(self):
        self.names: set[str] = set()
        self._built: frozenset[Node] = frozenset()  # nodes a rule built
        self._visited: frozenset[Node] = frozenset()  # nodes a walk passed shares through
        self._sites: dict[Node, str] = {}  # a node a rule of PRODUCTS passed shares through
        self._g_of: dict[Node, set[str]] = {}  # a g that reached such a node -> their rows

    def add(self, name: str) -> None:
        assert name in MEASURED, name
        self.names.add(name)

    # --- the run -----------------------------------------------------------------------

    def observe(self, node: Node, args: list, result) -> None:
        """One node computed: its operands' values `args` and its value `result` (f32 as
        bits: the exact domain's)."""
        op, shape = node.op, node.shape
        operands = node.operands
        if op in F32_OPS and operands and operands[0].dtype == "f32":
            self._f32(node, args, result)
        elif op in ("add", "mul") and node.dtype == "i32":
            exact_results = (a + b if op == "add" else a * b for a, b in zip(
                _elements(args[0], shape), _elements(args[1], shape), strict=True))
            if any(exact.wrap(r) != r for r in exact_results):
                self.add("i32.wraps")
        elif op in ("idiv", "mod", "shl", "shr"):
            self._i32(op, args, shape)
        elif op == "where":
            c = list(_elements(args[0], shape))
            if any(c) and not all(c):
                self.add("where.mixed")
        elif op == "cast":
            self._cast(node, args[0])
        elif op == "bitcast" and node.dtype == "f32" and operands[0].dtype == "i32":
            if any(exact.is_nan(b) for b in result.flat):
                self.add("bitcast.to-nan")
        tied = op == "reduce" and self._reduce(node, args[0])
        if node in self._built and node.dtype == "f32" and any(
                exact.is_subnormal(b) for b in np.asarray(result).flat):
            self.add("rule.subnormal")
        if node in self._visited:
            self._visited_values(node, args, tied)
        self._products(node, args, result)

    def _products(self, node: Node, args: list, result) -> None:
        """The products (PRODUCTS) a node took: as a rule's node, each operand's position,
        kind and classes; as the g reaching rules' nodes, its classes."""
        for reached in self._g_of.get(node, ()):
            for name in value_classes_of(result) if node.dtype == "f32" else ():
                if name in G_CLASSES:
                    self.add(f"product.{reached}.g.{name}")
        row = self._sites.get(node)
        if row is None:
            return
        operands, positions = node.operands, _PRODUCT_ROWS[row]
        same = len(positions) == 2 and operands[positions[0]] is operands[positions[1]]
        for position in positions:
            operand = operands[position]
            kind = ("same" if same else "literal" if operand.is_literal else
                    "loaded" if operand.op == "load" else "computed")
            for name in value_classes_of(args[position]):
                self.add(f"product.{row}.{position}.{kind}.{name}")

    # Complex on purpose: one test per value condition of an f32 op; split, the model would be
    # scattered.
    def _f32(self, node: Node, args: list, result) -> None:  # noqa: C901
        op, shape = node.op, node.shape
        columns = [list(_elements(a, shape)) for a in args]
        for column in columns:
            for bits in column:
                for key in _special(bits):
                    self.add(f"{op}.{key}")
        if op in F32_UNARY + F32_BINARY and op not in NEVER_SUBNORMAL and any(
                exact.is_subnormal(b) for b in np.asarray(result).flat):
            self.add(f"{op}.subnormal-result")
        pairs = list(zip(*columns, strict=True))
        if op in ("max", "cmplt", "cmpne"):
            equal = any(not exact.is_nan(a) and not exact.f32_ne(a, b) for a, b in pairs)
            if equal:
                self.add("max.tie" if op == "max" else f"{op}.equal")
            if op == "max" and any(_is_zero(a) and _is_zero(b) and a != b for a, b in pairs):
                self.add("max.signed-zeros")
        elif op == "add":
            out = list(np.asarray(result).flat)
            if any(_is_zero(r) and not _is_zero(a) for (a, _), r in zip(pairs, out,
                                                                            strict=True)):
                self.add("add.cancels")
            if any(_is_zero(a) and _is_zero(b) for a, b in pairs):
                self.add("add.zeros")
        elif op == "mul":
            out = list(np.asarray(result).flat)
            for (a, b), r in zip(pairs, out, strict=True):
                if _finite(a) and _finite(b) and not _finite(r) and not exact.is_nan(r):
                    self.add("mul.overflow")
                if not _is_zero(a) and not _is_zero(b) and _is_zero(r):
                    self.add("mul.underflow")
        elif op in ("recip", "log2", "sqrt", "exp2", "sin"):
            for (a,), r in zip(pairs, np.asarray(result).flat, strict=True):
                value = exact.decode(a)
                if op == "recip" and _is_zero(a):
                    self.add("recip.zero")
                elif op in ("log2", "sqrt") and value < 0:
                    self.add(f"{op}.negative")
                elif op == "exp2" and _finite(a) and not _finite(r):
                    self.add("exp2.overflow")
                elif op == "sin" and _finite(a) and abs(value) >= 2.0**20:
                    self.add("sin.large")

    def _i32(self, op: str, args: list, shape) -> None:
        for a, b in zip(_elements(args[0], shape), _elements(args[1], shape), strict=True):
            if op in ("idiv", "mod") and b == 0:
                self.add(f"{op}.by-zero")
            elif op in ("idiv", "mod") and a == exact.I32_MIN and b == -1:
                self.add(f"{op}.overflow")
            elif op == "idiv" and a != 0 and (a < 0) != (b < 0):
                self.add("idiv.signs-differ")
            if op == "mod" and a < 0:
                self.add("mod.negative-dividend")
            if op in ("shl", "shr") and not 0 <= b <= 31:
                self.add(f"{op}.count-outside")
            if op == "shr" and a < 0:
                self.add("shr.negative")

    def _cast(self, node: Node, value) -> None:
        source, target = node.operands[0].dtype, node.dtype
        for v in np.asarray(value).flat:
            if source == "f32" and target == "i32":
                real = exact.decode(v)
                if exact.is_nan(v) or not -2.0**31 <= real < 2.0**31:
                    self.add("cast.f32-i32-outside")
                elif real != math.trunc(real):
                    self.add("cast.f32-i32-fraction")
            elif source == "i32" and target == "f32" and abs(v) > 2**24 and \
                    exact.decode(exact.i32_to_f32(v)) != v:
                self.add("cast.i32-f32-inexact")
            elif source == "f32" and target == "bool" and exact.is_nan(v):
                self.add("cast.f32-bool-nan")

    def _reduce(self, node: Node, a) -> bool:
        """The reduce's conditions; whether a row of a reduce op=max holds its maximum
        twice."""
        op = node.attr("op")
        rows = reduced_rows(np.asarray(a), node.attr("axis"))
        if rows.shape[1] >= 8:
            self.add(f"reduce.{op}.long-row")
        tied = False
        if node.dtype != "f32":
            return tied
        for row in rows:
            values = list(row)
            if op == "max" and any(exact.is_nan(v) for v in values):
                self.add("reduce.max.nan")
            elif op == "max" and values:
                top = _row_max(values)
                if sum(not exact.f32_ne(v, top) for v in values) > 1:
                    self.add("reduce.max.tie")
                    tied = True
            elif op == "add" and values and all(_is_zero(v) for v in values) and \
                    exact.NEG_ZERO in values:
                self.add("reduce.add.signed-zeros")
        return tied

    def _visited_values(self, node: Node, args: list, tied: bool) -> None:
        """A node some walk passed shares through: the paths its rule took at these values
        (`tied`: a reduce op=max's row holds its maximum twice)."""
        shape = node.operands[0].shape if node.op == "reduce" else node.shape
        if node.op == "max" and node.dtype == "f32":
            for a, b in zip(_elements(args[0], shape), _elements(args[1], shape), strict=True):
                if exact.is_nan(a) or exact.is_nan(b):
                    self.add("rule.max.nan")
                elif not exact.f32_ne(a, b):
                    self.add("rule.max.tie")
                    if a != b:
                        self.add("rule.max.signed-zeros")
        elif tied:
            self.add("rule.reduce.max.tie")

    # --- the build -----------------------------------------------------------------------

    def program(self, program: Program) -> None:
        """What the built program holds: shapes, operands, the walks and the dependences
        of its gradients. Call before the run, so that the run knows which nodes a rule
        built and which ones a walk visited."""
        built: set[Node] = set()
        visited: set[Node] = set()
        statements = list(walk(program.statements))
        enclosing = _enclosing_loops(program.statements)
        for s in statements:
            if isinstance(s, Define):
                for node in s.created:
                    self._structure(node)
                if s.expansion is not None:
                    built.update(s.created)
                    self._expansion(program, s, statements, enclosing.get(s, ()))
                    visited.update(v.node for v in s.expansion.visits if v.passed)
                    self._product_sites(s.expansion.visits)
            elif isinstance(s, Store):
                if s.index is not None:
                    self.add("store.element")
                if s.value.is_literal:
                    self.add("store.literal")
            elif isinstance(s, Loop) and any(isinstance(b, Loop) for b in s.body):
                self.add("range.nested")
        for s in statements:
            if isinstance(s, Loop) and any(isinstance(b, Define) and b.node.op == "call"
                                           for b in walk(s.body)):
                self.add("call.in-range")
        for instance in program.calls.values():
            for d in instance.statements:
                self._structure(d.node)
        self._built, self._visited = frozenset(built), frozenset(visited)

    def _product_sites(self, visits) -> None:
        """The nodes of a walk whose rule the products follow, and the g that reached each."""
        for v in visits:
            row = rule_key(v.node)
            if v.passed and row in _PRODUCT_ROWS and v.node.dtype == "f32":
                self._sites[v.node] = row
                if v.gradient is not None:
                    self._g_of.setdefault(v.gradient, set()).add(row)

    # Complex on purpose: one test per structural condition; split, the model would be scattered.
    def _structure(self, node: Node) -> None:  # noqa: C901
        op, operands = node.op, node.operands
        if len(node.shape) in (3, 4):
            self.add(f"shape.rank-{len(node.shape)}")
        if any(d == 1 for d in node.shape[1:-1]) and max(node.shape, default=0) > 1:
            self.add("shape.size-one-middle")
        if 0 in node.shape:
            self.add("shape.empty")
        if op == "reduce" and 0 in operands[0].shape:
            self.add("reduce.of-empty")
        if node.is_literal and node.dtype == "i32" and node.attr("value") in (-2**31, 2**31 - 1):
            self.add("i32.extreme-literal")
        if op in F32_OPS and operands and operands[0].dtype == "f32":
            if any(o.is_literal for o in operands):
                self.add(f"{op}.literal")
            if len(operands) == 2 and operands[0] is operands[1]:
                self.add(f"{op}.same-operand")
        if op == "where":
            if operands[0].is_literal:
                self.add("where.literal-condition")
            if operands[1].is_literal or operands[2].is_literal:
                self.add("where.literal-value")
        elif op == "bitcast" and operands[0].op == "bitcast":
            self.add("bitcast.round-trip")
        elif op == "expand":
            self._expand(operands[0].shape, node.shape)
        elif op == "reshape" and len(operands[0].shape) != len(node.shape):
            self.add("reshape.rank-change")
        elif op == "load":
            if len(operands) == 2:
                self.add("load.element")
            if node.tag:
                self.add("load.after-store")
        elif op == "reduce":
            self._axes(node.attr("op"), operands[0].shape, node.attr("axis"))

    def _expand(self, source, shape) -> None:
        if not source:
            self.add("expand.scalar")
            axes = [k for k, d in enumerate(shape) if d > 1]
        else:
            axes = [k for k, (a, b) in enumerate(zip(source, shape, strict=True)) if a != b]
        if len(axes) == 1:
            self.add("expand.one-axis")
        elif len(axes) > 1:
            self.add("expand.several-axes")
        if any(0 < k < len(shape) - 1 for k in axes):
            self.add("expand.middle-axis")

    def _axes(self, op: str, shape, axes) -> None:
        if axes is None:
            self.add(f"reduce.{op}.all")
            return
        large = [k for k in axes if shape[k] > 1]
        if len(axes) == 1:
            self.add(f"reduce.{op}.one-axis")
        if len(large) > 1:
            self.add(f"reduce.{op}.several-axes")
        if any(0 < k < len(shape) - 1 for k in large):
            self.add(f"reduce.{op}.middle-axis")
        if any(shape[k] == 1 for k in axes):
            self.add(f"reduce.{op}.size-one-axis")

    # Complex on purpose: one test per condition of a gradient's expansion; split, the model
    # would be scattered.
    def _expansion(self, program: Program, s: Define, statements: list, loops) -> None:  # noqa: C901
        e = s.expansion
        assert e is not None  # the caller passes a gradient's Define
        earlier = {n for d in statements if isinstance(d, Define) and d.expansion is not None
                   and d is not s for n in d.created}
        for visit in e.visits:
            count = len(visit.shares)
            if count >= 8:
                self.add("walk.fan-in-8")
            elif count >= 2:
                self.add("walk.fan-in-2")
            node = visit.node
            key = rule_key(node)
            if node.op == "detach" and node is not e.x:
                self.add("rule.detach")  # a row that passes nothing
            if not visit.passed:
                continue
            if f"rule.{key}" in CONDITIONS:
                self.add(f"rule.{key}")
            operands = node.operands
            if node.op in ("max", "mul", "add") and operands[0] is operands[1]:
                self.add(f"rule.{node.op}.same-operand")
            if node.op in ("max", "mul") and any(o.is_literal for o in operands):
                self.add(f"rule.{node.op}.literal")
            if node.op == "where" and operands[0].is_literal:
                self.add("rule.where.literal-condition")
            if node.op == "reduce" and node.attr("op") == "add":
                axes = node.attr("axis")
                shape = operands[0].shape
                if len([k for k in (axes or range(len(shape))) if shape[k] > 1]) > 1:
                    self.add("rule.reduce.add.several-axes")
            if node.op == "expand":
                source = operands[0].shape
                axes = [k for k, d in enumerate(node.shape) if d > 1 and
                        (not source or source[k] == 1)]
                if len(axes) > 1:
                    self.add("rule.expand.several-axes")
        if not any(v.node is e.x for v in e.visits):
            self.add("walk.zeros")
        if e.x.op == "load":
            self.add("walk.x-is-load")
        if e.x in earlier:
            self.add("walk.x-built-by-gradient")
        if e.y in earlier or e.x in earlier or any(
                d.expansion is not None and d.node in reachable(e.y) for d in statements
                if isinstance(d, Define) and d is not s):
            self.add("walk.higher-order")
        if s.node.scope:
            self.add("walk.in-range")
        consts = [n for n in program.graph.nodes if n.op == "const" and n.dtype == "f32"]
        if any(n.attr("value") == exact.NEG_ZERO for n in consts) and any(
                n.op == "const" and n.attr("value") == exact.POS_ZERO for n in s.created):
            self.add("rule.zero-beside-negative-zero")
        self.dependence(e.y, e.x, program)
        tags = {loop.counter.tag for loop in loops}
        loads = {n for n in program.graph.nodes if n.op == "load" and n.scope in tags}
        for role in (e.y, e.x):
            self.open_range(role, tags, loads)

    def dependence(self, y: Node, x: Node, program: Program) -> None:
        """The routes by which y reaches x, through any edge (a detach, an i32 value, a
        call, memory): the nodes that lie on some path from y to x."""
        from .builder import reaching_stores
        reaching = reaching_stores(program.statements)

        def inputs(node: Node) -> list[Node]:
            found = list(node.operands)
            if node.op == "load":
                found += [store.value for store in reaching.get(node, ())]
            return found

        on_path = between(y, x, inputs)
        if any(n.op == "detach" for n in on_path):
            self.add("depends.detach")
            if any(n.op == "detach" and x in reachable(n) and x is not n for n in on_path):
                self.add("walk.through-detach")
        if any(n.dtype in ("i32", "bool") for n in on_path):
            self.add("depends.i32")
        if any(n.op == "bitcast" and n.dtype == "f32" and n.operands[0].op == "bitcast"
               for n in on_path):
            self.add("depends.bitcast-round-trip")
        if any(n.op == "call" for n in on_path):
            self.add("depends.call")
        hops = [n for n in on_path if n.op == "load" and reaching.get(n) and n is not x]
        if hops:
            self.add("depends.memory")
        if len(hops) > 1:
            self.add("depends.memory-two-hops")

    def open_range(self, node: Node, tags: set[int], loads_in_body: set[Node]) -> None:
        """Why `node` depends on a range the gradient is in (their counters' `tags`), if it
        does."""
        if not tags:
            return
        sources = [n for n in reachable(node) if (n.op == "range" and n.tag in tags)
                   or n in loads_in_body]
        if not sources:
            return
        if any(n in loads_in_body for n in sources):
            self.add("open-range.load")
        if any(n.op == "range" for n in reachable(node, through=lambda n: n not in
                                                   loads_in_body)):
            self.add("open-range.counter")
        direct = reachable(node, through=lambda n: n.op != "detach")
        if not any(s in direct for s in sources):
            self.add("open-range.through-detach")

    # --- what stopped it, and the text ---------------------------------------------------

    def rejected(self, problem: errors.IRError) -> None:
        rule = getattr(problem, "rule", None)
        if rule is not None:
            self.add(f"rejected.{rule}")
            message = problem.message
            if rule == errors.NO_RULE:
                # The node that stopped the walk, as the reference's message names its row.
                if "'load' has no gradient rule" in message:
                    self.add("rejected.no-rule.memory")
                elif "'call' has no gradient rule" in message:
                    self.add("rejected.no-rule.call")
                elif "'reduce op=mul' has no gradient rule" in message:
                    self.add("rejected.no-rule.reduce-mul")
        elif isinstance(problem, errors.IndexOutOfRange):
            self.add("error.index")
        else:
            self.add(f"error.{'syntax' if problem.kind == 'syntax' else 'invalid'}")

    def text(self, source: str, statements) -> None:
        """How the program is written: the same statements can be written many ways."""
        lines = source.splitlines()
        for number, line in enumerate(lines):
            code, hash_, _ = line.partition("#")
            if hash_:
                self.add("text.comment")
            if hash_ and not code.strip() and code:
                self.add("text.comment-line")
            if not line.strip() and 0 < number < len(lines) - 1:
                self.add("text.blank-line")
            body = code.strip()
            if "\t" in code or "  " in body:
                self.add("text.spacing")
        self._identity_text(statements)
        for s in statements:
            if not _in_printer_order(s.attrs):
                self.add("text.attributes-reordered")
            for o in s.operands:
                if o.kind == "f32":
                    if "e" in o.text.lower():
                        self.add("text.exponent-literal")
                    if o.text != o.canonical():
                        self.add("text.literal-respelled")

    def _identity_text(self, statements) -> None:
        """What of the text decides which statements are one node: a buffer loaded again,
        attributes written both ways, a literal two ways, names that differ only in a dot, an
        underscore or a letter's case; and the pairs of features the program holds."""
        orders: set = set()
        spellings: dict = {}
        names: dict = {}
        loaded: dict[str, bool] = {}  # a buffer loaded whole -> stored to since
        for s in statements:
            if s.op == "store" and s.operands[0].text in loaded:
                loaded[s.operands[0].text] = True
            if s.op == "load" and len(s.operands) == 1:
                if loaded.get(s.operands[0].text) is False:
                    self.add("load.again")
                loaded[s.operands[0].text] = False
            if len(s.attrs) > 1:
                orders.add(_in_printer_order(s.attrs))
            for text in [s.target] if s.target else []:
                names.setdefault(_folded(text), set()).add(text)
            for o in s.operands:
                if o.kind == "name":
                    names.setdefault(_folded(o.text), set()).add(o.text)
                if o.kind == "f32":
                    spellings.setdefault(o.canonical(), set()).add(o.text)
        features = sorted(f for f in features_of_statements(statements) if f in PAIR_FEATURES)
        for a, b in itertools.combinations(features, 2):
            self.add(f"pair.{a}+{b}")
        if len(orders) == 2:
            self.add("text.attributes-both-orders")
        if any(len(texts) > 1 for texts in spellings.values()):
            self.add("text.literal-two-spellings")
        if any(len(texts) > 1 for texts in names.values()):
            self.add("text.names-confusable")


def _in_printer_order(attrs) -> bool:
    """Whether a statement's attributes are written in the printer's order (ATTRIBUTE_ORDER;
    keys it does not know last)."""
    keys = [k for k, _ in attrs]
    return keys == sorted(keys, key=lambda k: ATTRIBUTE_ORDER.index(k)
                          if k in ATTRIBUTE_ORDER else len(ATTRIBUTE_ORDER))


def _folded(name: str) -> str:
    """A name with what `text.names-confusable` looks past taken out: '.', '_', case."""
    return name.lower().replace(".", "").replace("_", "")


def _enclosing_loops(statements: list) -> dict:
    """Each statement of a range body -> the Loops it stands in, outermost first."""
    found: dict = {}
    stack: list[tuple] = [(iter(statements), ())]
    while stack:
        body, loops = stack[-1]
        s = next(body, None)
        if s is None:
            stack.pop()
            continue
        found[s] = loops
        if isinstance(s, Loop):
            stack.append((iter(s.body), (*loops, s)))
    return found


def _row_max(values: list[int]) -> int:
    top = values[0]
    for v in values[1:]:
        top = exact.f32_max(top, v)
    return top


def reached_names(names: Iterable[str]) -> frozenset[str]:
    """Names read back from a record: only the model's own, whatever else was there."""
    return frozenset(n for n in names if isinstance(n, str) and n in CONDITIONS)


def kinds() -> dict[str, list[str]]:
    """The model's conditions by kind, in the table's order."""
    out: dict[str, list[str]] = {}
    for c in CONDITIONS.values():
        out.setdefault(c.kind, []).append(c.name)
    return out


def without(semantics, rule: str):
    """`semantics` with one rejection rule lifted: how a rejected program is built anyway,
    so that the paths that led to its rejection can be measured."""
    return dataclasses.replace(semantics, rejections=semantics.rejections - {rule})


def measure(source: str, statements, buffers=None, *, program=None, problem=None) -> Reached:
    """The conditions of one case, for a caller that does not run it itself: `program`
    built (run on `buffers`, if given) or `problem` the IRError that rejected it. A program
    rejected by a gradient rule is built again with that rule lifted (`without`), as often as
    another rule stops it, so that what led to the rejection is measured too."""
    from . import Runner
    reached = Reached()
    reached.text(source, statements)
    if problem is not None:
        reached.rejected(problem)
        program = rebuilt(statements, problem)
    if program is not None:
        reached.program(program)
        if buffers is not None and problem is None:
            try:
                Runner(program, observe=reached.observe)(buffers)
            except errors.IndexOutOfRange as out:
                reached.rejected(out)
    return reached


def rebuilt(statements, problem: errors.IRError):
    """The program a gradient rule rejected, built with the rules that stop it lifted; None
    if something else rejects it, or if no program can be built that way (`lifted`)."""
    rule = getattr(problem, "rule", None)  # a GradientError's; the others have none
    return lifted(statements, rule)[0] if rule is not None else None


def lifted(statements, rule: str) \
        -> tuple[Program | None, list[errors.IRError | SignatureError]]:
    """The program built with `rule` lifted, and each gradient rule that then rejects it
    lifted in turn: the program (None if something else stops it), and what rejected it on
    the way, in order (each GradientError, then the IRError that stopped it, if one did).
    A SignatureError stops it too: with x-literal lifted, the shares of a literal used
    beside a vector have the vector's shape, not the literal's, and the graph refuses their
    sum (the builder never raises one under the spec's own rules)."""
    from .builder import build_program
    from .semantics import SPEC
    semantics = without(SPEC, rule)
    problems: list[errors.IRError | SignatureError] = []
    while True:
        try:
            return build_program(list(statements), semantics), problems
        except (errors.IRError, SignatureError) as problem:
            problems.append(problem)
            again = getattr(problem, "rule", None)
            if again is None or again not in semantics.rejections:
                return None, problems
            semantics = without(semantics, again)
