"""tinygrad as an implementation: `--impl=adapters.tinygrad_impl`. SPEC.md, "Adapters".

tinygrad's UOp graph is the closest relative of this IR, so each IR op maps to one UOp
through `Tensor.alu` (CDIV and CMOD are C's idiv and mod), and reduce, expand, reshape, cast,
bitcast and detach map to the Tensor methods of the same names. `gradient` is
`y.gradient(x)`, tinygrad's own reverse mode on its graph.

tinygrad picks its device from the environment: run with DEV=PYTHON (the pure-Python device,
no compiler), as `make test` and `python -m conformance matrix` do. Even then, a gradient that
constant-folds is realized on the CPU device, which needs clang (`make test` installs it where
it can).
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from gradient_conformance.adapters.eager import (
    FRAMEWORK_CAPABILITIES,
    NUMPY,
    Backend,
    build_with,
    reduce_axes,
    shape_of,
)

NAME = "tinygrad"
VERSION = importlib.metadata.version("tinygrad")
CAPABILITIES = FRAMEWORK_CAPABILITIES
DTYPES = {"f32": dtypes.float32, "i32": dtypes.int32, "bool": dtypes.bool}
ALU = {"add": Ops.ADD, "mul": Ops.MUL, "max": Ops.MAX, "idiv": Ops.CDIV, "mod": Ops.CMOD,
       "shl": Ops.SHL, "shr": Ops.SHR, "and": Ops.AND, "or": Ops.OR, "xor": Ops.XOR,
       "cmplt": Ops.CMPLT, "cmpne": Ops.CMPNE, "recip": Ops.RECIPROCAL, "exp2": Ops.EXP2,
       "log2": Ops.LOG2, "sqrt": Ops.SQRT, "sin": Ops.SIN}



def _reduce(a: Tensor, attrs) -> Tensor:
    axis = attrs.get("axis")
    dims = reduce_axes(attrs, a.ndim)
    if not dims:
        return a
    keep = axis is not None
    op = attrs["op"]
    if op == "add":
        return a.sum(axis=dims, keepdim=keep)
    if op == "max":
        return a.max(axis=dims, keepdim=keep)
    return a.prod(axis=dims, keepdim=keep)


def _broadcast(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """alu takes equal shapes: a literal (a scalar) is expanded to the other's shape."""
    if a.shape == b.shape:
        return a, b
    if a.ndim == 0:
        return a.reshape((1,) * b.ndim).expand(b.shape) if b.ndim else a, b
    return a, b.reshape((1,) * a.ndim).expand(a.shape)


class Tinygrad(Backend):
    name, version = NAME, VERSION

    def literal(self, operand):
        if operand.kind == "f32":
            return Tensor(np.array(np.uint32(operand.value).view(np.float32)))
        if operand.kind == "bool":
            return Tensor(np.array(bool(operand.value)))
        return Tensor(np.array(int(operand.value), np.int32))

    def from_numpy(self, array, dtype):
        return Tensor(np.array(array, dtype=NUMPY[dtype], copy=True))

    def to_numpy(self, value, dtype, shape):
        return value.cast(DTYPES[dtype]).numpy().astype(NUMPY[dtype]).reshape(shape)

    def op(self, name, operands, attrs):
        if name in ALU:
            if len(operands) == 2:
                a, b = _broadcast(*operands)
                return a.alu(ALU[name], b)
            return operands[0].alu(ALU[name])
        a = operands[0]
        if name == "where":
            c, x, y = operands
            x, y = _broadcast(x, y)
            c, x = _broadcast(c, x)
            x, y = _broadcast(x, y)
            return c.where(x, y)
        if name == "reduce":
            return _reduce(a, attrs)
        if name == "expand":
            shape = shape_of(attrs["shape"])
            return (a.reshape((1,) * len(shape)) if a.ndim == 0 else a).expand(shape)
        if name == "reshape":
            return a.reshape(shape_of(attrs["shape"]))
        if name == "cast":
            return a.cast(DTYPES[attrs["dtype"]])
        if name == "bitcast":
            return a.bitcast(DTYPES[attrs["dtype"]])
        if name == "detach":
            return a.detach()
        raise NotImplementedError(name)

    def element(self, value, index):
        return value.reshape(-1)[index]

    def with_element(self, value, index, element):
        flat = value.reshape(-1)
        mask = Tensor(np.arange(flat.shape[0]) == index)
        return mask.where(element.reshape(1).expand(flat.shape), flat).reshape(value.shape)

    def broadcast(self, value, shape, dtype):
        value = value.cast(DTYPES[dtype])
        if value.shape == tuple(shape):
            return value
        return (value.reshape((1,) * len(shape)) if value.ndim == 0 else value).expand(shape)

    def grad(self, y, x):
        (g,) = y.gradient(x)
        return g

    def index(self, value):
        return int(value.numpy())


def build(source: str):
    return build_with(source, Tinygrad())
