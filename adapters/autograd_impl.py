"""HIPS autograd as an implementation, on the adapter kit: `--impl=adapters.autograd_impl`.
docs/adapters.md, "Adapters"; README.md, "Adapt your framework" shows this file.

autograd differentiates numpy code written with `autograd.numpy`, function by function, so
this is a functional framework: `grad_function(f, x)` is `autograd.grad(f)(x)`, and the kit
hands over f. detach is `getval`, the value without its trace. float32 throughout: numpy's
own float32 arithmetic, and autograd's derivatives of it.
"""

from __future__ import annotations

import importlib.metadata

import autograd
import autograd.numpy as anp
import numpy as np
from autograd.tracer import getval

from gradient_conformance.adapters.kit import FRAMEWORK_CAPABILITIES, FunctionalFramework


def _reduce(a, op, axes, keepdims):
    fn = {"add": anp.sum, "max": anp.max, "mul": anp.prod}[op]
    return fn(a, axis=axes, keepdims=keepdims).astype(getval(a).dtype)


OPS = {
    "add": anp.add, "mul": anp.multiply, "max": anp.maximum,
    "idiv": lambda a, b: np.trunc(a / b).astype(np.int32), "mod": np.fmod,
    "shl": np.left_shift, "shr": np.right_shift,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "cmplt": anp.less, "cmpne": anp.not_equal, "recip": anp.reciprocal, "exp2": anp.exp2,
    "log2": anp.log2, "sqrt": anp.sqrt, "sin": anp.sin, "where": anp.where, "detach": getval,
    "reduce": _reduce, "cast": lambda a, dtype: anp.array(a).astype(dtype),
    "bitcast": lambda a, dtype: getval(a).view(dtype),
    "expand": lambda a, shape: anp.broadcast_to(a, shape),
    "reshape": anp.reshape,
}
DTYPES = {"f32": np.float32, "i32": np.int32, "bool": np.bool_}


class Autograd(FunctionalFramework):
    name, version = "autograd", importlib.metadata.version("autograd")
    # autograd refuses with TypeErrors ("Grad only applies to real scalar-output functions").
    capabilities = FRAMEWORK_CAPABILITIES | {"rejection": ["TypeError"]}
    ops, dtypes = OPS, DTYPES

    def tensor(self, array):
        return array

    def numpy(self, value):
        return np.asarray(getval(value))

    def grad_function(self, f, x):
        return autograd.grad(f)(x)


FRAMEWORK = Autograd()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
