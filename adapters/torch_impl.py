"""PyTorch as an implementation: `--impl=adapters.torch_impl`. SPEC.md, "Adapters".

float32 on the CPU. Each IR op maps to the torch op a user would write. `gradient` is
`torch.autograd.grad(y, x, create_graph=True)`, so that gradients of gradients work, with
`allow_unused=True` and zeros where y does not depend on x. `detach` is `.detach()`.
Inputs of f32 slots require grad, as a user's would. A literal or a detached tensor does not,
so torch refuses to differentiate against it, and the adapter passes that on as torch's own
rejection.
"""

from __future__ import annotations

import numpy as np
import torch

from gradient_conformance.adapters.eager import (
    FRAMEWORK_CAPABILITIES,
    Backend,
    build_with,
    reduce_axes,
    shape_of,
)

DTYPES = {"f32": torch.float32, "i32": torch.int32, "bool": torch.bool}

NAME = "pytorch"
VERSION = torch.__version__
# torch's float32 exp2, log2 and sin are not correctly rounded (they call libm or SLEEF
# vector code); 2 ulps is what we claim for them and measure in the report. Gradients are not
# claimed bit-exact: torch accumulates in its own order.
CAPABILITIES = FRAMEWORK_CAPABILITIES


def _reduce(a, attrs):
    op, axis = attrs["op"], attrs.get("axis")
    dims = reduce_axes(attrs, a.dim())
    if not dims:
        return a.clone()
    if op == "add":
        out = torch.sum(a, dim=dims, keepdim=axis is not None)
    elif op == "max":  # over nothing, torch raises: its answer, passed on
        out = torch.amax(a, dim=dims, keepdim=axis is not None)
    else:
        out = a
        for d in sorted(dims, reverse=True):
            out = torch.prod(out, dim=d, keepdim=axis is not None)
    return out.to(a.dtype)


def _cast(a, attrs):
    return a.to(DTYPES[attrs["dtype"]])


def _bitcast(a, attrs):
    return a.contiguous().view(DTYPES[attrs["dtype"]])


OPS = {
    "add": lambda a, b: torch.add(a, b),
    "mul": lambda a, b: torch.mul(a, b),
    "max": lambda a, b: torch.maximum(a, b),
    "idiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "mod": lambda a, b: torch.fmod(a, b),
    "shl": lambda a, b: torch.bitwise_left_shift(a, b),
    "shr": lambda a, b: torch.bitwise_right_shift(a, b),
    "and": lambda a, b: torch.bitwise_and(a, b),
    "or": lambda a, b: torch.bitwise_or(a, b),
    "xor": lambda a, b: torch.bitwise_xor(a, b),
    "cmplt": lambda a, b: torch.lt(a, b),
    "cmpne": lambda a, b: torch.ne(a, b),
    "recip": torch.reciprocal,
    "exp2": torch.exp2,
    "log2": torch.log2,
    "sqrt": torch.sqrt,
    "sin": torch.sin,
    "where": torch.where,
    "detach": lambda a: a.detach(),
}
WITH_ATTRS = {
    "reduce": _reduce,
    "cast": _cast,
    "bitcast": _bitcast,
    "expand": lambda a, attrs: a.expand(shape_of(attrs["shape"])),
    "reshape": lambda a, attrs: a.reshape(shape_of(attrs["shape"])),
}



class Torch(Backend):
    name, version = NAME, VERSION

    def literal(self, operand):
        if operand.kind == "f32":
            return torch.tensor(np.uint32(operand.value).view(np.float32))
        if operand.kind == "bool":
            return torch.tensor(bool(operand.value))
        return torch.tensor(int(operand.value), dtype=torch.int32)

    def from_numpy(self, array, dtype):
        t = torch.from_numpy(np.array(array, copy=True))
        return t.requires_grad_(True) if dtype == "f32" else t

    def to_numpy(self, value, dtype, shape):
        return value.detach().to(DTYPES[dtype]).reshape(shape).numpy().copy()

    def op(self, name, operands, attrs):
        if name in WITH_ATTRS:
            return WITH_ATTRS[name](operands[0], attrs)
        return OPS[name](*operands)

    def element(self, value, index):
        return value.reshape(-1)[index]

    def with_element(self, value, index, element):
        flat = value.reshape(-1).clone()
        flat[index] = element
        return flat.reshape(value.shape)

    def broadcast(self, value, shape, dtype):
        return value.to(DTYPES[dtype]).expand(tuple(shape)).clone()

    def grad(self, y, x):
        (g,) = torch.autograd.grad(y, x, create_graph=True, allow_unused=True)
        return torch.zeros_like(x) if g is None else g

    def index(self, value):
        return int(value.item())


BACKEND = Torch()


def build(source: str):
    return build_with(source, BACKEND)
