"""PyTorch as an implementation: `--impl=adapters.torch_impl`. docs/adapters.md, "Adapters".

float32 on the CPU, on the adapter kit (adapters/kit.py). Each IR op is the torch op a user
would write. `gradient` is `torch.autograd.grad(y, x, create_graph=True)`, so that gradients
of gradients work, with zeros where y does not depend on x. `detach` is `.detach()`. Inputs of
f32 slots require grad, as a user's would. A literal or a detached tensor does not, so torch
refuses to differentiate against it, and the adapter passes that on as torch's own rejection.
"""

from __future__ import annotations

import torch

from gradient_conformance.adapters.kit import Framework


def _reduce(a, op, axes, keepdims):
    if op == "add":
        return torch.sum(a, dim=axes, keepdim=keepdims).to(a.dtype)
    if op == "max":  # over nothing, torch raises: its answer, passed on
        return torch.amax(a, dim=axes, keepdim=keepdims)
    out = a
    for d in sorted(axes, reverse=True):  # torch.prod takes one dim at a time
        out = torch.prod(out, dim=d, keepdim=keepdims)
    return out.to(a.dtype)


OPS = {
    "add": torch.add, "mul": torch.mul, "max": torch.maximum,
    "idiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"), "mod": torch.fmod,
    "shl": torch.bitwise_left_shift, "shr": torch.bitwise_right_shift,
    "and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor,
    "cmplt": torch.lt, "cmpne": torch.ne, "recip": torch.reciprocal, "exp2": torch.exp2,
    "log2": torch.log2, "sqrt": torch.sqrt, "sin": torch.sin, "where": torch.where,
    "detach": torch.Tensor.detach, "reduce": _reduce,
    "cast": lambda a, dtype: a.to(dtype),
    "bitcast": lambda a, dtype: a.contiguous().view(dtype),
    "expand": lambda a, shape: a.expand(shape),
    "reshape": lambda a, shape: a.reshape(shape),
}
DTYPES = {"f32": torch.float32, "i32": torch.int32, "bool": torch.bool}


class Torch(Framework):
    name, version = "pytorch", torch.__version__
    ops, dtypes = OPS, DTYPES

    def tensor(self, array):
        return torch.from_numpy(array.copy())

    def numpy(self, value):
        return value.detach().numpy()

    def watch(self, value):
        return value.requires_grad_(True)

    def grad(self, y, x):
        (g,) = torch.autograd.grad(y, x, create_graph=True, allow_unused=True)
        return torch.zeros_like(x) if g is None else g


FRAMEWORK = Torch()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
