"""The hash-consed graph: frozen nodes, interned per graph, and the table of op signatures.

SPEC.md, "Hash consing" and "Operations". A node is keyed on (op, dtype, shape, operands,
attributes, scope, tag): `scope` keeps the nodes of a range body apart from every node outside
it, and `tag` carries identity the structure cannot show (a load's count of earlier stores to
its buffer, a range counter's loop). `Graph.node` is the only way to make a node; it checks the
op's signature and returns the existing node when an equal one exists.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from .ops import DTYPES, OPS, REDUCE_OPS

MAX_ELEMENTS = 1 << 24  # the reference's limit on one value's size; SPEC.md, "Limits"
# One order for attributes, so that equal nodes have equal keys however they were written.
ATTRIBUTE_ORDER = ("slot", "dtype", "shape", "op", "axis", "value", "count", "func", "index")


class SignatureError(Exception):
    """An op applied to operands or attributes it does not accept. `operand` is the index of
    the operand at fault, or None for an attribute or the op as a whole."""

    def __init__(self, message: str, operand: int | None = None, *, limit: bool = False):
        super().__init__(message)
        self.limit = limit  # beyond the reference's own limit (SPEC.md, "Limits")
        self.operand = operand


@dataclass(frozen=True, eq=False)
class Node:
    """One value of a program. Equality is identity: a graph interns equal nodes as one."""

    id: int
    op: str
    dtype: str
    shape: tuple[int, ...]
    operands: tuple[Node, ...]
    attrs: tuple[tuple[str, object], ...]
    scope: int  # 0 at top level, else the id of the innermost enclosing range
    tag: int | None  # load: stores to its buffer before it; range: the loop's id
    line: int = field(compare=False)  # the line that first built it

    def attr(self, key: str, default=None):
        return dict(self.attrs).get(key, default)

    @property
    def is_literal(self) -> bool:
        return self.op == "const"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.op}, {self.dtype}{list(self.shape)})"


def scoped_key(op: str, dtype: str, shape: tuple[int, ...], operands: tuple[Node, ...],
               attrs: tuple, scope: int, tag: int | None, origin: int) -> tuple:
    """What makes two nodes one (SPEC.md, "Hash consing"): op, dtype, shape, operands and
    attributes, in one scope, with one tag. `attrs` come in the order written; their order
    does not count (SPEC.md, "Operations": one canonical order). `origin` (the line of the
    gradient that builds a node, 0 for the program's own) does not count: an expansion's nodes
    are interned with the program's."""
    return (op, dtype, shape, tuple(o.id for o in operands), canonical(attrs), scope, tag)


def canonical(attrs) -> tuple:
    """Attributes in the one order a node stores them (SPEC.md, "Operations")."""
    return tuple(sorted(attrs, key=_attribute_rank))


# The nodes that stay where they are made (ir.md, "Hash consing": "a load inside a range
# body is never merged with one outside it"): a load, a range's counter, and the leaves that
# only one place makes (a buffer, a function's parameter).
PLACED = frozenset({"load", "range", "buffer", "param"})


def hoisted_scope(op: str, operands: tuple[Node, ...], scope: int) -> int:
    """The scope a node made in `scope` is in (SPEC.md, "Hash consing"): a load's (and a
    counter's) is where it is made; any other node's is the innermost of its operands'
    (range ids grow inwards), 0 for a literal: `mul %w 2.0` in a body, with `%w` from
    outside, is the `mul %w 2.0` outside (ir.md)."""
    if op in PLACED:
        return scope
    return max((o.scope for o in operands), default=0)


class Graph:
    """Interns nodes. One graph per program, and one per instance of a function body; nothing
    is shared between graphs, so nothing leaks from one program to the next. `key` says which
    nodes are equal: the spec's `scoped_key`, or a variant's (reference/semantics.py);
    `scope_of`, which scope a node is in: the spec's `hoisted_scope`, or a variant's."""

    def __init__(self, key: Callable[..., object] = scoped_key,
                 scope_of: Callable[..., int] = hoisted_scope):
        self.nodes: list[Node] = []
        self._index: dict[object, Node] = {}
        self._key, self._scope_of = key, scope_of

    def node(self, op: str, operands: tuple[Node, ...] = (), attrs=(), *, scope: int = 0,
             tag: int | None = None, line: int = 0, dtype: str | None = None,
             shape: tuple[int, ...] | None = None, origin: int = 0) -> Node:
        """The node (op operands attrs) in `scope`, made if it is new. dtype and shape come from
        the op's signature; only leaves (buffer, const, param, range) pass them in."""
        written = tuple(attrs)  # the key decides whether their order counts
        scope = self._scope_of(op, tuple(operands), scope)
        if dtype is None:
            dtype, shape = infer(op, operands, dict(written))
        assert shape is not None, op  # a leaf passes its shape with its dtype
        key = self._key(op, dtype, shape, tuple(operands), written, scope, tag, origin)
        found = self._index.get(key)
        if found is None:
            found = Node(len(self.nodes), op, dtype, shape, tuple(operands), canonical(written),
                         scope, tag, line)
            self.nodes.append(found)
            self._index[key] = found
        return found

    def const(self, dtype: str, value, *, scope: int = 0, line: int = 0,
              origin: int = 0) -> Node:
        """A literal: f32 by its bits, i32 by its value, bool by its truth."""
        return self.node("const", (), (("value", value),), scope=scope, line=line, dtype=dtype,
                         shape=(), origin=origin)

    def keys(self) -> list[tuple]:
        """Every node's key, in the order made: two graphs are the same graph when equal."""
        return [(n.op, n.dtype, n.shape, tuple(o.id for o in n.operands), n.attrs, n.scope,
                 n.tag) for n in self.nodes]


def _attribute_rank(item: tuple[str, object]) -> tuple[int, str]:
    key = item[0]
    return (ATTRIBUTE_ORDER.index(key) if key in ATTRIBUTE_ORDER else len(ATTRIBUTE_ORDER), key)


# --- signatures -----------------------------------------------------------------------------


def check_shape(shape) -> tuple[int, ...]:
    if not isinstance(shape, tuple) or not all(isinstance(d, int) for d in shape):
        raise SignatureError(f"a shape is a list of integers, like [2,3], not {shape!r}")
    if any(d < 0 for d in shape):
        raise SignatureError(f"shape {list(shape)} has a negative dimension")
    if math.prod(shape) > MAX_ELEMENTS:
        raise SignatureError(f"shape {list(shape)} has more than {MAX_ELEMENTS} elements, the "
                             "reference's limit", limit=True)
    return shape


def _elementwise_shape(op: str, operands: tuple[Node, ...]) -> tuple[int, ...]:
    """Literals broadcast; every other operand must have one shape (SPEC.md, "Broadcast")."""
    shapes = {o.shape for o in operands if not o.is_literal}
    if len(shapes) > 1:
        listed = ", ".join(f"{list(o.shape)}" for o in operands)
        hint = ""
        if () in shapes:
            hint = "; a scalar that is not a literal must be expanded explicitly"
        values = [k for k, o in enumerate(operands) if not o.is_literal]
        odd = next(k for k in values if operands[k].shape != operands[values[0]].shape)
        raise SignatureError(f"operands of {op} have different shapes ({listed}){hint}", odd)
    return shapes.pop() if shapes else ()


def _same_dtype(op: str, operands, allowed: tuple[str, ...]) -> str:
    for k, o in enumerate(operands):
        if o.dtype not in allowed:
            raise SignatureError(f"{op} takes {' or '.join(allowed)} operands; operand {k + 1} "
                                 f"is {o.dtype}", k)
    if len({o.dtype for o in operands}) > 1:
        listed = ", ".join(o.dtype for o in operands)
        raise SignatureError(f"operands of {op} must have one dtype, not {listed}", 1)
    return operands[0].dtype


def _elementwise(op, operands, attrs):
    row = OPS[op]
    dtype = _same_dtype(op, operands, row.dtypes)
    return row.result or dtype, _elementwise_shape(op, operands)


def _where(op, operands, attrs):
    c, a, b = operands
    if c.dtype != "bool":
        raise SignatureError(f"the condition of where must be bool, not {c.dtype}", 0)
    if a.dtype != b.dtype:
        raise SignatureError(f"the two values of where must have one dtype, not {a.dtype} and "
                             f"{b.dtype}", 2)
    return a.dtype, _elementwise_shape(op, operands)


def _dtype_attr(attrs, allowed=DTYPES) -> str:
    dtype = attrs.get("dtype")
    if dtype not in allowed:
        raise SignatureError(f"dtype= must be one of {', '.join(allowed)}, not {dtype!r}")
    return dtype


def _cast(op, operands, attrs):
    return _dtype_attr(attrs), operands[0].shape


def _bitcast(op, operands, attrs):
    _same_dtype(op, operands, ("f32", "i32"))
    return _dtype_attr(attrs, ("f32", "i32")), operands[0].shape


def reduce_axes(shape: tuple[int, ...], axis) -> tuple[int, ...] | None:
    """The reduced axes, checked: None (all, result []), or strictly increasing in range."""
    if axis is None:
        return None
    if isinstance(axis, int):
        axis = (axis,)
    if not isinstance(axis, tuple) or not all(0 <= a < len(shape) for a in axis):
        raise SignatureError(f"axis= must list axes of the operand's shape {list(shape)}, "
                             f"each in [0, {len(shape)}), not {axis!r}")
    if list(axis) != sorted(set(axis)):
        raise SignatureError(f"axis={list(axis)} must be strictly increasing")
    return axis


def _reduce(op, operands, attrs):
    a = operands[0]
    _same_dtype(op, operands, ("f32", "i32"))
    if attrs.get("op") not in REDUCE_OPS:
        raise SignatureError(f"reduce needs op=add, op=max or op=mul, not {attrs.get('op')!r}")
    axes = reduce_axes(a.shape, attrs.get("axis"))
    if axes is None:
        return a.dtype, ()
    return a.dtype, tuple(1 if k in axes else d for k, d in enumerate(a.shape))


def _expand(op, operands, attrs):
    a, shape = operands[0], check_shape(attrs.get("shape"))
    if a.shape and (len(a.shape) != len(shape)
                    or any(d not in (1, s) for d, s in zip(a.shape, shape, strict=True))):
        raise SignatureError(f"cannot expand shape {list(a.shape)} to {list(shape)}: the operand "
                             "must be a scalar, or have the same rank with each dim equal or 1", 0)
    return a.dtype, shape


def _reshape(op, operands, attrs):
    a, shape = operands[0], check_shape(attrs.get("shape"))
    if math.prod(shape) != a.size:
        raise SignatureError(f"cannot reshape {list(a.shape)} ({a.size} elements) to "
                             f"{list(shape)} ({math.prod(shape)} elements)", 0)
    return a.dtype, shape


def _same(op, operands, attrs):
    return operands[0].dtype, operands[0].shape


def _load(op, operands, attrs):
    buffer = operands[0]
    if buffer.op != "buffer":
        raise SignatureError("load takes a buffer (declared with `buffer slot=...`), then an "
                             "optional index", 0)
    if len(operands) == 1:
        return buffer.dtype, buffer.shape
    _index_check(operands[1])
    return buffer.dtype, ()


def _index_check(index: Node) -> None:
    if index.dtype != "i32" or index.shape != ():
        raise SignatureError(f"an index must be an i32 scalar, not {index.dtype}"
                             f"{list(index.shape)}", 1)


# The signature rules of the ops that are not elementwise; an elementwise op's is its row's
# dtypes (ops.py). `call` has none: its signature is its function body's (builder.py).
_SHAPE_RULES: dict[str, Callable] = {
    "where": _where, "cast": _cast, "bitcast": _bitcast, "reduce": _reduce, "expand": _expand,
    "reshape": _reshape, "detach": _same, "load": _load,
}
# op -> (operand count, or a (min, max) range; signature rule returning (dtype, shape)).
SIGNATURES: dict[str, tuple[int | tuple[int, int], Callable]] = {
    name: (op.arity, _elementwise if op.elementwise else _SHAPE_RULES[name])
    for name, op in OPS.items()}


def infer(op: str, operands: tuple[Node, ...], attrs: dict) -> tuple[str, tuple[int, ...]]:
    """The dtype and shape of (op operands attrs), or SignatureError."""
    if op not in SIGNATURES:
        raise SignatureError(f"unknown op '{op}'")
    arity, rule = SIGNATURES[op]
    low, high = arity if isinstance(arity, tuple) else (arity, arity)
    if not low <= len(operands) <= high:
        want = f"{low}" if low == high else f"{low} or {high}"
        raise SignatureError(f"{op} takes {want} operand{'s' if high > 1 else ''}, "
                             f"not {len(operands)}")
    for k, o in enumerate(operands):
        if o.op == "buffer" and not (op == "load" and k == 0):
            raise SignatureError(f"operand {k + 1} of {op} is a buffer, a handle and not a "
                                 "value: load it first", k)
    extra = set(attrs) - OPS[op].attributes
    if extra:
        raise SignatureError(f"{op} takes no attribute {sorted(extra)[0]}=")
    return rule(op, operands, attrs)
