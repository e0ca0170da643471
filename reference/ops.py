"""The IR's vocabulary, once: its ops, dtypes, features and conventions. SPEC.md, "Operations".

Each row of OPS is one op: how many operands it takes and of which dtypes, the dtype of its
result when that is not its operands', its attributes, which rows of the gradient table
(rules.py) differentiate it, whether SPEC.md lets an implementation declare an error in ulps
for it, and how the interpreter computes it element by element. Everything else that needs a
list of ops (the signature checks, the interpreter, the generators' menus, the capabilities a
loader accepts, the variants of the spec, the forward checks) derives it from this table, so
that a new op is one row here plus its rule, its arithmetic and its case files.
"""

from __future__ import annotations

from dataclasses import dataclass

from .syntax import parse

DTYPES = ("f32", "i32", "bool")

# What a slot the program only stores into holds before the run: a quiet NaN with a payload
# no program computes (arithmetic gives 0x7fc00000), and for i32 the same bits. A correct
# program cannot leave it unchanged by accident, as it could zeros (a gradient of 0) or any
# value it might compute; the checks also refuse it in place of any other NaN. A bool has no
# such value: a generated case draws a bool slot, and a case file's starts as zeros.
POISON = 0x7FC0DEAD


@dataclass(frozen=True)
class Op:
    """One op of the IR.

    `evaluate` maps an operand dtype to how one element is computed: for f32, the name of a
    method of the f32 domain (interp.ExactF32, and the real and dual domains beside it); for
    i32 and bool, the name of a function of exact.py. Ops with no `evaluate` are computed by
    the interpreter's own code (where, casts, shapes, memory, detach)."""

    name: str
    arity: int | tuple[int, int]
    dtypes: tuple[str, ...]
    result: str | None = None  # the result's dtype, where it is not the operands'
    attributes: frozenset[str] = frozenset()
    rules: tuple[str, ...] = ()  # its rows in rules.RULES; none: gradient rejects it
    transcendental: bool = False  # SPEC.md lets an implementation declare ulps for it
    evaluate: tuple[tuple[str, str], ...] = ()

    @property
    def elementwise(self) -> bool:
        return bool(self.evaluate)

    def computed(self, dtype: str) -> str | None:
        """How one element of `dtype` operands is computed (see `evaluate`), or None."""
        return dict(self.evaluate).get(dtype)

    @property
    def features(self) -> tuple[str, ...]:
        """The names an implementation may declare unsupported for this op (CAPABILITIES;
        SPEC.md, "The protocol"): the op; the op on operands of one dtype (`and:bool`), for
        an op of several; and `reduce_mul` for the reduce that has no rule."""
        typed = tuple(f"{self.name}:{d}" for d in self.dtypes) \
            if len(self.dtypes) > 1 and self.name != "load" else ()
        return (self.name, *typed, *(("reduce_mul",) if self.name == "reduce" else ()))


def _binary(name, dtypes, result=None, rules=(), **evaluate):
    return Op(name, 2, dtypes, result, rules=rules, evaluate=tuple(evaluate.items()))


def _unary(name, method, *, transcendental=False):
    return Op(name, 1, ("f32",), rules=(name,), transcendental=transcendental,
              evaluate=(("f32", method),))


OPS: dict[str, Op] = {op.name: op for op in (
    _binary("add", ("f32", "i32"), rules=("add",), f32="add", i32="i32_add"),
    _binary("mul", ("f32", "i32"), rules=("mul",), f32="mul", i32="i32_mul"),
    _binary("max", ("f32", "i32"), rules=("max",), f32="max", i32="i32_max"),
    _unary("recip", "recip"),
    _unary("exp2", "exp2", transcendental=True),
    _unary("log2", "log2", transcendental=True),
    _unary("sqrt", "sqrt"),
    _unary("sin", "sin", transcendental=True),
    _binary("idiv", ("i32",), i32="i32_idiv"),  # C's: truncating, x/0 = 0, MIN/-1 = MIN
    _binary("mod", ("i32",), i32="i32_mod"),
    _binary("and", ("i32", "bool"), i32="int_and", bool="int_and"),
    _binary("or", ("i32", "bool"), i32="int_or", bool="int_or"),
    _binary("xor", ("i32", "bool"), i32="int_xor", bool="int_xor"),
    _binary("shl", ("i32",), i32="i32_shl"),
    _binary("shr", ("i32",), i32="i32_shr"),
    _binary("cmplt", ("f32", "i32"), "bool", f32="lt", i32="int_lt"),
    _binary("cmpne", ("f32", "i32", "bool"), "bool", f32="ne", i32="int_ne", bool="int_ne"),
    Op("where", 3, ("bool", "f32", "i32"), rules=("where",)),
    Op("cast", 1, DTYPES, attributes=frozenset({"dtype"}), rules=("cast",)),
    Op("bitcast", 1, ("f32", "i32"), attributes=frozenset({"dtype"}), rules=("bitcast",)),
    Op("reduce", 1, ("f32", "i32"), attributes=frozenset({"op", "axis"}),
       rules=("reduce.add", "reduce.max")),  # op=mul has no rule
    Op("expand", 1, DTYPES, attributes=frozenset({"shape"}), rules=("expand",)),
    Op("reshape", 1, DTYPES, attributes=frozenset({"shape"}), rules=("reshape",)),
    Op("detach", 1, DTYPES, rules=("detach",)),
    Op("load", (1, 2), DTYPES),  # a buffer, then an optional i32 index
)}

REDUCE_OPS = ("add", "max", "mul")  # reduce's op= attribute

# Statements that are not ops, and properties of a program, that an implementation may also
# declare unsupported.
STATEMENT_FEATURES = ("gradient", "store", "range", "call", "higher_order")

FEATURES = frozenset(f for op in OPS.values() for f in op.features) | frozenset(
    STATEMENT_FEATURES)

TRANSCENDENTAL = frozenset(name for name, op in OPS.items() if op.transcendental)

# The conditions (reference/conditions.py) at which a machine's integer division traps, as
# x86's idiv does: what the suite does not send an implementation that declares it.
TRAPS = frozenset({"idiv.by-zero", "idiv.overflow", "mod.by-zero", "mod.overflow"})


def elementwise(dtype: str, arity: int, *, result: str | None = None) -> tuple[str, ...]:
    """The elementwise ops of `arity` operands that take `dtype` and give `result` (the same
    dtype, when None), in the table's order."""
    return tuple(name for name, op in OPS.items() if op.arity == arity and
                 op.computed(dtype) is not None and (op.result or dtype) == (result or dtype))


def feature(op: str, reduce_op: str | None = None, dtype: str | None = None) -> str:
    """The feature a statement of `op` uses: the op, or `reduce_mul` for a reduce op=mul;
    with `dtype`, the op on operands of that dtype (`and:i32`)."""
    if dtype is not None:
        return f"{op}:{dtype}"
    return "reduce_mul" if op == "reduce" and reduce_op == "mul" else op


def typed_features(nodes) -> frozenset[str]:
    """The ops-by-dtype features of a built program's nodes (`and:bool`): what a program's
    text alone cannot say, since an operand's dtype is known only once it is built. The
    dtype is the first operand's, the where's, its second."""
    found = set()
    for node in nodes:
        op = OPS.get(node.op)
        if op is not None and len(op.dtypes) > 1 and node.operands and node.op != "load":
            operand = node.operands[1 if node.op == "where" else 0]
            found.add(feature(node.op, dtype=operand.dtype))
    return frozenset(found)


def features_of(source: str) -> frozenset[str]:
    """The ops a program uses (`reduce_mul` for a reduce op=mul), and `higher_order` when a
    gradient's loss or x depends on the result of another gradient."""
    return features_of_statements(parse(source))


def features_of_statements(statements) -> frozenset[str]:
    """features_of, for a program already parsed."""
    features: set[str] = set()
    from_gradient: set[str] = set()
    for s in statements:
        if s.op in ("def", "end", "return", "buffer"):
            continue
        features.add(feature(s.op, s.attr("op")))
        names = {o.text for o in s.operands if o.kind == "name"}
        if s.op == "gradient" and names & from_gradient:
            features.add("higher_order")
        if s.target and (s.op == "gradient" or names & from_gradient):
            from_gradient.add(s.target)
    return frozenset(features)
