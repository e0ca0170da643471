"""Running a built program. SPEC.md, "Running a program".

The interpreter is written once for any *domain* of f32 numbers: `ExactF32` (here: IEEE
binary32 through exact.py) is the reference; realvalued.py supplies the real numbers and dual
numbers that the cross-checks read the same program in. i32 and bool are the same in every
domain. Values are numpy object arrays of domain scalars, walked one element at a time: the
reference is slow on purpose, and every step is the spec's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from . import exact
from .errors import IndexOutOfRange
from .graph import Node
from .ops import OPS
from .program import Define, Loop, Program, Store

NUMPY_DTYPES = {"f32": np.float32, "i32": np.int32, "bool": np.bool_}


class ExactF32:
    """IEEE binary32, correctly rounded: an f32 is its 32-bit pattern."""

    name = "exact"
    add, mul, max = staticmethod(exact.f32_add), staticmethod(exact.f32_mul), \
        staticmethod(exact.f32_max)
    recip, sqrt = staticmethod(exact.f32_recip), staticmethod(exact.f32_sqrt)
    exp2, log2, sin = staticmethod(exact.f32_exp2), staticmethod(exact.f32_log2), \
        staticmethod(exact.f32_sin)
    lt, ne = staticmethod(exact.f32_lt), staticmethod(exact.f32_ne)
    to_i32, from_i32 = staticmethod(exact.f32_to_i32), staticmethod(exact.i32_to_f32)
    to_bool, from_bool = staticmethod(exact.f32_to_bool), staticmethod(exact.bool_to_f32)

    @staticmethod
    def literal(bits: int) -> int:
        return bits

    @staticmethod
    def constant(value: int) -> int:
        """detach: the same value (a domain with tangents drops them here)."""
        return value

    @staticmethod
    def from_bits(bits: int) -> int:
        return bits

    @staticmethod
    def to_bits(value: int) -> int:
        return value


EXACT = ExactF32()


def elementwise_table(d) -> dict[tuple[str, str], Callable]:
    """(op, operand dtype) -> the scalar function, for the elementwise ops: the domain's
    method for f32, exact.py's function for i32 and bool (ops.py, `Op.evaluate`)."""
    return {(op.name, dtype): getattr(d if dtype == "f32" else exact, name)
            for op in OPS.values() for dtype, name in op.evaluate}


def _casts(d) -> dict[tuple[str, str], Callable]:
    """(from dtype, to dtype) -> the scalar conversion of `cast`."""
    same = lambda v: v  # noqa: E731
    return {
        ("f32", "f32"): same, ("i32", "i32"): same, ("bool", "bool"): same,
        ("f32", "i32"): d.to_i32, ("i32", "f32"): d.from_i32,
        ("f32", "bool"): d.to_bool, ("bool", "f32"): d.from_bool,
        ("i32", "bool"): lambda v: v != 0, ("bool", "i32"): int,
    }


def _bitcasts(d) -> dict[tuple[str, str], Callable]:
    return {
        ("f32", "f32"): lambda v: v, ("i32", "i32"): lambda v: v,
        ("f32", "i32"): lambda v: exact.to_signed(d.to_bits(v)),
        ("i32", "f32"): lambda v: d.from_bits(exact.to_unsigned(v)),
    }


def _identity(d, op: str, dtype: str):
    """The value of an empty reduction."""
    if dtype == "i32":
        return {"add": 0, "max": exact.I32_MIN, "mul": 1}[op]
    return d.literal({"add": exact.POS_ZERO, "max": exact.NEG_INF, "mul": exact.ONE}[op])


def fold_row(op: str, step: Callable, row: list):
    """reduce's fold of one row: left, in row-major order, from the first element."""
    total = row[0]
    for v in row[1:]:
        total = step(total, v)
    return total


class Interpreter:
    """Runs one program in one domain. `run` may be called many times; it keeps no state.

    A domain may also carry `overrides`, (op, operand dtype) -> a scalar function in place of
    the table's, `arrays`, op -> a function of a node and its operands' values, and its own
    `fold_row`: the suite's variants of the spec do (conformance/diagnosis/variants.py); the spec's
    domains have none of them. `observe(node, operand values, value)`, if given, is told of
    every node computed (conditions.py measures a case's conditions so)."""

    def __init__(self, program: Program, domain=EXACT, *, observe: Callable | None = None):
        self.program, self.domain, self.observe = program, domain, observe
        self.elementwise = {**elementwise_table(domain), **getattr(domain, "overrides", {})}
        self.arrays = getattr(domain, "arrays", {})
        self.fold_row = getattr(domain, "fold_row", fold_row)
        self.casts, self.bitcasts = _casts(domain), _bitcasts(domain)

    def run(self, memory: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        """Run on initial contents (object arrays of domain values, one per declared slot);
        return the final contents. Raises RunError for an index out of range."""
        return self.evaluate(memory)[0]

    def evaluate(self, memory: dict[int, np.ndarray], pinned: dict[Node, np.ndarray] | None = None
                 ) -> tuple[dict[int, np.ndarray], dict[Node, np.ndarray]]:
        """Run, and also return every top-level node's value. `pinned` fixes the values of
        some top-level nodes instead of computing them: finite differences pin each detach to
        its value at the unmoved point, which is what "passes no gradient" means."""
        memory = {slot: np.array(value, dtype=object) for slot, value in memory.items()}
        env: dict[Node, np.ndarray] = dict(pinned or {})
        self._block(self.program.statements, env, memory)
        return memory, env

    # --- statements -----------------------------------------------------------------------

    def _block(self, statements: list, env: dict, memory: dict) -> None:
        for s in statements:
            if isinstance(s, Define):
                if s.node.op == "load" and s.node not in env:
                    env[s.node] = self._load(s, env, memory)  # reads memory now, in order
                else:
                    self._value(s.node, env)
            elif isinstance(s, Store):
                self._store(s, env, memory)
            elif isinstance(s, Loop):
                for i in range(s.count):
                    # Nodes of this body are values of one iteration: forget them each time.
                    for n in [n for n in env if n.scope == s.counter.tag]:
                        del env[n]
                    env[s.counter] = np.array(i, dtype=object)
                    self._block(s.body, env, memory)

    def _load(self, s: Define, env: dict, memory: dict) -> np.ndarray:
        buffer, *index = s.node.operands
        contents = memory[buffer.attr("slot")]
        if not index:
            return contents.copy()
        k = self._index(s.line, self._value(index[0], env), buffer)
        return np.array(contents.flat[k], dtype=object)

    def _store(self, s: Store, env: dict, memory: dict) -> None:
        value = self._value(s.value, env)
        slot = s.buffer.attr("slot")
        if s.index is None:
            memory[slot] = np.array(np.broadcast_to(value, s.buffer.shape), dtype=object)
        else:
            k = self._index(s.line, self._value(s.index, env), s.buffer)
            memory[slot].flat[k] = value.item()

    def _index(self, line: int, index: np.ndarray, buffer: Node) -> int:
        k = index.item()
        if not 0 <= k < buffer.size:
            name = self.program.names.get(buffer, f"slot {buffer.attr('slot')}")
            raise IndexOutOfRange(line, str(k), f"index {k} is out of range for {name}, which has "
                           f"{buffer.size} element{'s' if buffer.size != 1 else ''}")
        return k

    # --- values -----------------------------------------------------------------------------

    def _value(self, root: Node, env: dict) -> np.ndarray:
        """The value of root, computing what it needs first (iteratively, not recursively)."""
        stack = [root]
        while stack:
            node = stack[-1]
            if node in env:
                stack.pop()
                continue
            missing = [o for o in node.operands if o not in env]
            if missing:
                assert all(o.op not in ("load", "range", "param") for o in missing), \
                    "a load, counter or parameter is evaluated by its statement"
                stack.extend(missing)
                continue
            stack.pop()
            args = [env[o] for o in node.operands]
            env[node] = self._compute(node, args)
            if self.observe is not None:
                self.observe(node, args, env[node])
        return env[root]

    def _compute(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        op, d = node.op, self.domain
        if op == "const":
            value = node.attr("value")
            return np.array(d.literal(value) if node.dtype == "f32" else value, dtype=object)
        if op == "buffer":
            return np.array(None, dtype=object)  # a handle: never read as a value
        if op in self.arrays:
            return self.arrays[op](node, args)
        if (op, node.operands[0].dtype if node.operands else None) in self.elementwise:
            return _map(self.elementwise[(op, node.operands[0].dtype)], node.shape, args)
        if op == "where":
            c, a, b = (np.broadcast_to(v, node.shape) for v in args)
            return np.array(np.where(c.astype(bool), a, b), dtype=object)
        if op == "cast":
            return _map(self.casts[(node.operands[0].dtype, node.dtype)], node.shape, args)
        if op == "bitcast":
            return _map(self.bitcasts[(node.operands[0].dtype, node.dtype)], node.shape, args)
        if op == "reduce":
            return self._reduce(node, args[0])
        if op == "expand":
            return np.array(np.broadcast_to(args[0], node.shape), dtype=object)
        if op == "reshape":
            return args[0].reshape(node.shape)
        if op == "detach":
            return _map(d.constant, node.shape, args) if node.dtype == "f32" else args[0]
        if op == "call":
            return self._call(node, args)
        raise AssertionError(f"no evaluation for {op}")

    def _reduce(self, node: Node, a: np.ndarray) -> np.ndarray:
        """A left fold in row-major order of the reduced elements, from the first one."""
        op = node.attr("op")
        rows = reduced_rows(a, node.attr("axis"))
        step = self.elementwise[(op, a_dtype := node.operands[0].dtype)]
        out = np.empty(rows.shape[0], dtype=object)
        for r, row in enumerate(rows):
            out[r] = self.fold_row(f"{op}.{a_dtype}", step, list(row)) if len(row) else \
                _identity(self.domain, op, a_dtype)
        return out.reshape(node.shape)

    def _call(self, node: Node, args: list[np.ndarray]) -> np.ndarray:
        instance = self.program.calls[node]
        env = dict(zip(instance.params, args, strict=True))
        for s in instance.statements:
            self._value(s.node, env)
        return self._value(instance.result, env)


def _map(function: Callable, shape: tuple[int, ...], args: list[np.ndarray]) -> np.ndarray:
    """Apply a scalar function elementwise; literal (0-d) operands broadcast."""
    out = np.empty(shape, dtype=object)
    if not shape:  # rank 0, the commonest: no broadcasting, no iterators
        out[()] = function(*(a[()] for a in args))
        return out
    # An operand of the result's shape is read as it is; only a literal is broadcast.
    columns = [a.flat if a.shape == shape else np.broadcast_to(a, shape).flat for a in args]
    flat = out.reshape(-1)  # a view: out is fresh and contiguous
    for k, values in enumerate(zip(*columns, strict=True)):
        flat[k] = function(*values)
    return out


# --- numpy arrays in and out (the protocol's view) ---------------------------------------------


def from_numpy(array: np.ndarray, dtype: str, domain=EXACT) -> np.ndarray:
    """A numpy array of the IR dtype as an object array of domain values."""
    array = np.asarray(array)
    if dtype == "f32":
        bits = array.astype(np.float32).view(np.uint32)
        return _map(lambda b: domain.from_bits(int(b)), bits.shape, [np.array(bits, object)])
    if dtype == "i32":
        return np.array([int(v) for v in array.astype(np.int32).flat],
                        dtype=object).reshape(array.shape)
    return np.array([bool(v) for v in array.flat], dtype=object).reshape(array.shape)


def to_numpy(values: np.ndarray, dtype: str, domain=EXACT) -> np.ndarray:
    if dtype == "f32":
        bits = [domain.to_bits(v) for v in values.flat]
        return exact.to_numpy_f32(bits).reshape(values.shape)
    return np.array(list(values.flat), dtype=NUMPY_DTYPES[dtype]).reshape(values.shape)


def reduced_rows(a: np.ndarray, axes) -> np.ndarray:
    """The rows a reduce over `axes` (None: all) folds: one per kept index, in row-major
    order, each holding the reduced elements in row-major order."""
    axes = tuple(range(a.ndim)) if axes is None else tuple(axes)
    kept = [k for k in range(a.ndim) if k not in axes]
    return a.transpose(kept + list(axes)).reshape(
        math.prod(a.shape[k] for k in kept), math.prod(a.shape[k] for k in axes))
