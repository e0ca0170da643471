"""micrograd as an implementation: `--impl=adapters.micrograd_impl`. docs/adapters.md, "Adapters".

micrograd (Karpathy's, from PyPI) is the tape-style engine of the lesson: scalar `Value`s
with add, mul, pow and relu, in Python floats (binary64), with `backward()` from one scalar.
A tensor here is a numpy object array of Values, so shapes, expand, reshape and a left-fold
sum work as numpy does them.

- recip is `a ** -1`, the one way micrograd can express it.
- detach is a fresh `Value` with the same data.
- gradient zeroes every `.grad` in the loss's graph, calls `backward()`, and reads x's `.grad`.
  Those grads are floats, so a gradient of a gradient is impossible: `higher_order` is
  declared unsupported.
- Results are rounded to f32 once, at the end. The arithmetic is micrograd's binary64, and
  that difference is a finding about micrograd, which the suite reports.
- The tape exercise: `backprop(tape)` builds the tape's Values and calls `backward()` on the
  last.
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
from micrograd.engine import Value

from gradient_conformance.adapters.eager import Backend, build_with, reduce_axes, shape_of

NAME = "micrograd"
VERSION = importlib.metadata.version("micrograd")
SUPPORTED = {"add", "mul", "recip", "reduce", "expand", "reshape", "detach", "gradient", "load",
             "store", "buffer"}
CAPABILITIES = {
    "unsupported": sorted({"max", "idiv", "mod", "shl", "shr", "and", "or", "xor", "cmplt",
                           "cmpne", "exp2", "log2", "sqrt", "sin", "where", "cast", "bitcast",
                           "range", "call", "reduce_mul", "higher_order"}),
    "ulp": {}, "bit_exact_gradients": False,
}


class Unsupported(Exception):
    pass


def _values(array: np.ndarray) -> np.ndarray:
    out = np.empty(array.shape, dtype=object)
    for k, v in np.ndenumerate(array):
        out[k] = Value(float(v))
    return out


def _map(fn, *arrays):
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=object) for a in arrays])
    out = np.empty(arrays[0].shape, dtype=object)
    for k in np.ndindex(out.shape):
        out[k] = fn(*(a[k] for a in arrays))
    return out


def _reduce(a, attrs):
    if attrs["op"] != "add":
        raise Unsupported(f"micrograd has no reduce op={attrs['op']}")
    axis = attrs.get("axis")
    dims = reduce_axes(attrs, a.ndim)
    kept = [d for d in range(a.ndim) if d not in dims]
    moved = np.transpose(a, kept + list(dims)).reshape(
        [a.shape[d] for d in kept] + [int(np.prod([a.shape[d] for d in dims]))])
    out = np.empty(moved.shape[:-1], dtype=object)
    for k in np.ndindex(out.shape):
        row = moved[k]
        total = row[0] if len(row) else Value(0.0)
        for v in row[1:]:
            total = total + v  # a left fold, as micrograd users sum
        out[k] = total
    if axis is not None:
        out = out.reshape([1 if d in dims else n for d, n in enumerate(a.shape)])
    return out


class Micrograd(Backend):
    name, version = NAME, VERSION

    def literal(self, operand):
        if operand.kind != "f32":
            # Not micrograd's: a plain Python int, enough for an index (i32 arithmetic is
            # declared unsupported).
            return np.array(operand.value, dtype=object)
        return np.array(Value(float(np.uint32(operand.value).view(np.float32))), dtype=object)

    def from_numpy(self, array, dtype):
        if dtype != "f32":
            raise Unsupported(f"micrograd has no {dtype} values")
        return _values(array)

    def to_numpy(self, value, dtype, shape):
        return np.array([v.data for v in np.asarray(value, dtype=object).ravel()],
                        dtype=np.float64).astype(np.float32).reshape(shape)

    def op(self, name, operands, attrs):
        if name == "add":
            return _map(lambda a, b: a + b, *operands)
        if name == "mul":
            return _map(lambda a, b: a * b, *operands)
        if name == "recip":
            return _map(lambda a: a ** -1, *operands)
        if name == "detach":
            return _map(lambda a: Value(a.data), *operands)
        if name == "reduce":
            return _reduce(operands[0], attrs)
        if name == "expand":
            return np.broadcast_to(operands[0], shape_of(attrs["shape"])).copy()
        if name == "reshape":
            return np.asarray(operands[0], dtype=object).reshape(shape_of(attrs["shape"]))
        raise Unsupported(f"micrograd has no {name}")

    def element(self, value, index):
        return np.array(np.asarray(value, dtype=object).ravel()[index], dtype=object)

    def with_element(self, value, index, element):
        flat = np.asarray(value, dtype=object).ravel().copy()
        flat[index] = np.asarray(element, dtype=object).item()
        return flat.reshape(np.shape(value))

    def broadcast(self, value, shape, dtype):
        return np.broadcast_to(np.asarray(value, dtype=object), shape).copy()

    def gradient(self, y, x):
        y = np.asarray(y, dtype=object)
        if y.shape != ():
            raise ValueError("backward() starts from one scalar Value")
        root = y.item()
        for v in [*_graph(root), *np.asarray(x, dtype=object).ravel()]:
            v.grad = 0.0  # x too: off the loss's graph, its derivative is 0, not a stale grad
        root.backward()
        return _map(lambda v: Value(v.grad), x)

    def index(self, value):
        item = np.asarray(value, dtype=object).item()
        if isinstance(item, Value):
            raise Unsupported("an index must be an i32, and micrograd has only Values")
        return int(item)


def _graph(root):
    seen, stack = set(), [root]
    while stack:
        v = stack.pop()
        if id(v) not in seen:
            seen.add(id(v))
            stack.extend(v._prev)
            yield v



def build(source: str):
    return build_with(source, Micrograd())


def backprop(tape):
    """The tape through micrograd: Values forward, `backward()` from the last, each entry's
    `.grad` rounded once to f32. Invalid tapes raise, as a student's code would."""
    if not isinstance(tape, list) or not tape:
        raise ValueError("a tape is a non-empty list")
    values = []
    for k, entry in enumerate(tape):
        kind = entry[0]
        if kind in ("input", "const") and len(entry) == 2:
            if isinstance(entry[1], bool) or not isinstance(entry[1], int | float):
                raise ValueError(f"entry {k}: {entry[1]!r} is not a number")
            values.append(Value(float(np.float32(entry[1]))))
            continue
        if kind not in ("add", "mul") or len(entry) != 3:
            raise ValueError(f"entry {k}: {entry!r}")
        i, j = entry[1], entry[2]
        if any(isinstance(o, bool) or not isinstance(o, int) or not 0 <= o < k for o in (i, j)):
            raise ValueError(f"entry {k}: operands must be earlier entries")
        values.append(values[i] + values[j] if kind == "add" else values[i] * values[j])
    values[-1].backward()
    return [float(np.float32(v.grad)) for v in values]
