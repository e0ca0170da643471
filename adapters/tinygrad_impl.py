"""tinygrad as an implementation: `--impl=adapters.tinygrad_impl`. docs/adapters.md, "Adapters".

tinygrad's UOp graph is the closest relative of this IR, so each IR op maps to one UOp
through `Tensor.alu` (CDIV and CMOD are C's idiv and mod), and reduce, expand, reshape, cast,
bitcast and detach map to the Tensor methods of the same names, on the adapter kit
(adapters/kit.py). `gradient` is `y.gradient(x)`, tinygrad's own reverse mode on its graph.

tinygrad picks its device from DEV, which the sandbox's scrubbed environment does not keep:
so it runs on its default device, CPU, which compiles each kernel with clang (`make test`
installs it where it can), unless the user passes DEV on (`--pass-env DEV`, with DEV=PYTHON
for the pure-Python device). The device is part of the version the adapter states ("0.14.0 on
CPU"), so a report says which device its answers came from, and `recheck` re-checks it only
on that one (another version is a usage error there).
"""

from __future__ import annotations

import importlib.metadata

from tinygrad import Device, Tensor, dtypes
from tinygrad.uop.ops import Ops

from gradient_conformance.adapters.kit import Framework

ALU = {"add": Ops.ADD, "mul": Ops.MUL, "max": Ops.MAX, "idiv": Ops.CDIV, "mod": Ops.CMOD,
       "shl": Ops.SHL, "shr": Ops.SHR, "and": Ops.AND, "or": Ops.OR, "xor": Ops.XOR,
       "cmplt": Ops.CMPLT, "cmpne": Ops.CMPNE, "recip": Ops.RECIPROCAL, "exp2": Ops.EXP2,
       "log2": Ops.LOG2, "sqrt": Ops.SQRT, "sin": Ops.SIN}


def _broadcast(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """alu takes equal shapes: a literal (a scalar) is expanded to the other's shape."""
    if a.shape == b.shape:
        return a, b
    if a.ndim == 0:
        return a.reshape((1,) * b.ndim).expand(b.shape) if b.ndim else a, b
    return a, b.reshape((1,) * a.ndim).expand(a.shape)


def _alu(op):
    def apply(a, b=None):
        if b is None:
            return a.alu(op)
        a, b = _broadcast(a, b)
        return a.alu(op, b)
    return apply


def _where(c, x, y):
    x, y = _broadcast(x, y)
    c, x = _broadcast(c, x)
    x, y = _broadcast(x, y)
    return c.where(x, y)


def _reduce(a, op, axes, keepdims):
    return {"add": a.sum, "max": a.max, "mul": a.prod}[op](axis=axes, keepdim=keepdims)


OPS = {name: _alu(op) for name, op in ALU.items()} | {
    "where": _where, "detach": Tensor.detach, "reduce": _reduce,
    "cast": Tensor.cast, "bitcast": Tensor.bitcast,
    "expand": lambda a, shape: (a.reshape((1,) * len(shape)) if a.ndim == 0 else a)
    .expand(shape),
    "reshape": Tensor.reshape,
}
DTYPES = {"f32": dtypes.float32, "i32": dtypes.int32, "bool": dtypes.bool}


class Tinygrad(Framework):
    name = "tinygrad"
    version = f"{importlib.metadata.version('tinygrad')} on {Device.DEFAULT}"
    ops, dtypes = OPS, DTYPES

    def tensor(self, array):
        return Tensor(array.copy())

    def numpy(self, value):
        return value.numpy()

    def grad(self, y, x):
        try:
            (g,) = y.gradient(x)
        except AssertionError as refused:
            # tinygrad refuses a loss that is not a scalar with an assert: that one is its
            # deliberate answer; any other AssertionError stays the crash it is.
            if "must be called on a scalar tensor" in str(refused):
                raise NotAScalar(str(refused)) from refused
            raise
        return g


class NotAScalar(Exception):
    """tinygrad's refusal of a loss that is not a scalar (an assert in tinygrad)."""


FRAMEWORK = Tinygrad()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
