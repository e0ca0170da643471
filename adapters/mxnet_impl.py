"""MXNet 1.9.1 as an implementation, served from its own venv (docs/adapters.md, "Adapters"):
`--impl="cmd:.venv-mxnet/bin/python -m gradient_conformance serve adapters.mxnet_impl"`.

The `mxnet.np` interface with `npx.set_np()`, float32 on the CPU, eager (imperative)
autograd. MXNet differentiates against arrays marked with `attach_grad()`, and marking an
array cuts it from the graph that made it, so an intermediate x cannot be marked in place.
Like the JAX adapter, this one keeps for every value the op and operands that made it;
`gradient y x` marks a fresh copy of x and, under `autograd.record()`, recomputes y from it
along that record, then asks `autograd.grad(y, [x], create_graph=True)`. A gradient inside
another is recomputed the same way, inside the outer recording, which is how MXNet nests
(where its operators have second derivatives). detach is `ndarray.detach()`: the numpy
interface has no stop_gradient. Every value and every derivative is MXNet's own.

MXNet's numpy interface has no shifts, no truncating integer division and no bit casts, so
`shl`, `shr`, `idiv` and `bitcast` are declared unsupported; `mod` is its `np.mod`, and exp2
is `np.power(2, a)`, as it has no exp2 either.
"""

from __future__ import annotations

import os

# MXNet's default engine runs operators asynchronously and keeps a failed one's error to raise
# at a later wait, in whichever program waits next (measured: a program the run refused for
# an empty reduction of the program before it, accepted when re-run alone). The naive engine
# runs each operator when it is called, so an error is the answer of the program that caused
# it. MXNet reads the variable once, when its engine starts, so it is set before the import.
os.environ["MXNET_ENGINE_TYPE"] = "NaiveEngine"

import mxnet
import numpy
from mxnet import autograd, np, npx

from gradient_conformance.adapters.eager import (
    FRAMEWORK_CAPABILITIES,
    NUMPY,
    RecordingBackend,
    Value,
    build_with,
    recompute,
    reduce_axes,
    shape_of,
)

npx.set_np()

NAME = "mxnet"
VERSION = mxnet.__version__
CAPABILITIES = {**FRAMEWORK_CAPABILITIES, "unsupported": ["shl", "shr", "idiv", "bitcast"]}
DTYPES = {"f32": "float32", "i32": "int32", "bool": "bool"}


def _reduce(a, attrs):
    dims = reduce_axes(attrs, a.ndim)
    if not dims:
        return a
    keep = attrs.get("axis") is not None
    fn = {"add": np.sum, "max": np.max, "mul": np.prod}[attrs["op"]]
    return fn(a, axis=dims, keepdims=keep).astype(a.dtype)


def _with_element(a, e, attrs):
    """a with one element replaced, by concatenation: MXNet records no in-place writes."""
    flat, i = a.reshape(-1), attrs["index"]
    return np.concatenate([flat[:i], e.reshape(1).astype(a.dtype), flat[i + 1:]]).reshape(
        a.shape)


OPS = {
    "add": np.add, "mul": np.multiply, "max": np.maximum, "mod": np.mod,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "cmplt": np.less, "cmpne": np.not_equal,
    "recip": np.reciprocal, "exp2": lambda a: np.power(np.array(2.0, dtype=a.dtype), a),
    "log2": np.log2, "sqrt": np.sqrt, "sin": np.sin, "where": np.where,
    "detach": lambda a: a.detach(),
    "reduce": _reduce,
    "cast": lambda a, attrs: a.astype(DTYPES[attrs["dtype"]]),
    "expand": lambda a, attrs: np.broadcast_to(a, shape_of(attrs["shape"])),
    "reshape": lambda a, attrs: a.reshape(shape_of(attrs["shape"])),
    "element": lambda a, attrs: a.reshape(-1)[attrs["index"]],
    "with_element": _with_element,
    "broadcast": lambda a, attrs: np.broadcast_to(a.astype(DTYPES[attrs["dtype"]]),
                                                  attrs["shape"]).copy(),
}
WITH_ATTRS = {"reduce", "cast", "expand", "reshape", "element", "with_element", "broadcast"}


def _apply(op, arrays, attrs):
    if op not in OPS:
        raise NotImplementedError(f"MXNet's numpy interface has no {op}")
    fn = OPS[op]
    return fn(*arrays, attrs) if op in WITH_ATTRS else fn(*arrays)


def _depends(y: Value, x: Value) -> bool:
    seen, stack = set(), [y]
    while stack:
        v = stack.pop()
        if v is x:
            return True
        if id(v) not in seen and v.op != "detach":
            seen.add(id(v))
            stack.extend(v.operands)
            if v.op == "gradient":
                stack.append(v.attrs["y"])
    return False


def _grad(y: Value, x: Value, x_array, outer: dict, variable: Value | None = None):
    """dy/dx at x_array, by MXNet: x marked, y recomputed from it under recording. `outer`
    binds the outer gradient's marked variable (id -> array), so that the outer gradient
    sees through this one."""
    if not _depends(y, x):
        return np.zeros_like(x_array)
    if x is variable:  # the outer gradient's own x: already marked, and kept so
        fresh = x_array
    else:  # a copy cut from its history: an outer gradient does not see through it (a limit)
        fresh = x_array.copy()
        fresh.attach_grad()
    bound = {k: a for k, a in outer.items() if k != id(x)}
    bound[id(x)] = fresh
    def inner(node, gx_array, memo):  # a gradient inside this one: x stays marked
        return _grad(node.attrs["y"], node.attrs["x"], gx_array, {id(x): memo[id(x)]}, x)

    with autograd.record():
        y_array = recompute(y, bound, _apply, inner)
        (g,) = autograd.grad(y_array, [fresh], create_graph=True, retain_graph=True)
    # MXNet 1.9 gives the gradient as a legacy NDArray, even with numpy semantics on.
    return g.as_np_ndarray() if hasattr(g, "as_np_ndarray") else g


class MXNet(RecordingBackend):
    name, version = NAME, VERSION
    WITH_ATTRS = frozenset(WITH_ATTRS)  # the table above, for the recording backend

    def literal(self, operand):
        if operand.kind == "f32":
            return Value(np.array(numpy.uint32(operand.value).view(numpy.float32),
                                  dtype="float32"))
        if operand.kind == "bool":
            return Value(np.array(bool(operand.value), dtype="bool"))
        return Value(np.array(int(operand.value), dtype="int32"))

    def from_numpy(self, array, dtype):
        return Value(np.array(numpy.array(array, NUMPY[dtype]), dtype=DTYPES[dtype]))

    def to_numpy(self, value, dtype, shape):
        return value.array.asnumpy().astype(NUMPY[dtype]).reshape(shape)

    def apply(self, op, arrays, attrs):
        return _apply(op, arrays, attrs)

    def grad_array(self, y, x):
        return _grad(y, x, x.array, {})

    def index(self, value):
        return int(value.array.asnumpy())


def build(source: str):
    return build_with(source, MXNet())
