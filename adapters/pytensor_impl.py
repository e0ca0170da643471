"""PyTensor as an implementation: `--impl=adapters.pytensor_impl`. docs/adapters.md, "Adapters".

PyTensor (3.0.7, the last for Python 3.11) builds a symbolic graph, differentiates it as
graph with `pytensor.grad` while the graph is built, like the IR's `gradient`, then rewrites
and compiles the whole graph with `pytensor.function` (C code through g++). On the adapter
kit, the run is that graph: `compile` makes a symbolic variable for each buffer and hands the
function its results. detach is `zero_grad`. PyTensor has no shifts, no truncating division
and no bit casts: declared unsupported. An index computed from the inputs is symbolic, which
the kit's load and store cannot use: PyTensor's own refusal.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.gradient import zero_grad

from gradient_conformance.adapters.kit import FRAMEWORK_CAPABILITIES, Framework


def _reduce(a, op, axes, keepdims):
    fn = {"add": pt.sum, "max": pt.max, "mul": pt.prod}[op]
    return pt.cast(fn(a, axis=axes, keepdims=keepdims), a.dtype)


OPS = {
    "add": pt.add, "mul": pt.mul, "max": pt.maximum, "mod": pt.mod,
    "and": pt.bitwise_and, "or": pt.bitwise_or, "xor": pt.bitwise_xor,
    "cmplt": pt.lt, "cmpne": pt.neq, "recip": pt.reciprocal, "exp2": pt.exp2,
    "log2": pt.log2, "sqrt": pt.sqrt, "sin": pt.sin, "where": pt.where, "detach": zero_grad,
    "reduce": _reduce, "cast": pt.cast,
    "expand": lambda a, shape: pt.broadcast_to(a, shape),
    "reshape": lambda a, shape: pt.reshape(a, shape, ndim=len(shape)),
}
DTYPES = {"f32": "float32", "i32": "int32", "bool": "bool"}
# pytensor.grad refuses a loss that is not a scalar with TypeError("cost must be a scalar."),
# its deliberate answer, so named (impl-protocol.md).
CAPABILITIES = {**FRAMEWORK_CAPABILITIES, "unsupported": ["shl", "shr", "idiv", "bitcast"],
                "rejection": ["TypeError"]}


class PyTensor(Framework):
    name, version = "pytensor", pytensor.__version__
    ops, dtypes, capabilities = OPS, DTYPES, CAPABILITIES

    def tensor(self, array):
        return pt.as_tensor_variable(array)

    def numpy(self, value):
        return np.asarray(value)

    def shape(self, value):
        return tuple(value.type.shape)

    def grad(self, y, x):
        return pytensor.grad(y, x, disconnected_inputs="ignore")

    def compile(self, function, example):
        names = sorted(example)
        inputs = [pt.tensor(dtype=example[n].dtype, shape=example[n].type.shape, name=n)
                  for n in names]
        outputs = function(dict(zip(names, inputs, strict=True)))
        compiled = pytensor.function(inputs, [outputs[n] for n in names],
                                     on_unused_input="ignore")
        return lambda arrays: dict(zip(names, compiled(*[np.asarray(arrays[n].data)
                                                        for n in names]), strict=True))


FRAMEWORK = PyTensor()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
