"""A kernel-style system for the kit's lowering (tests/test_lowering.py): flat numpy arrays,
elementwise ops and a gather, and nothing else; HIPS autograd differentiates (a gather's
derivative is its scatter-add).
Every op checks that it is handed flat arrays of its result's size and gives the dtype it
was told, so a lowering that leaks a shape or a wrong dtype fails here.
docs/adapters.md, "Adapters".
"""

from __future__ import annotations

import math

import autograd.numpy as anp
import numpy as np
from autograd.tracer import getval

from gradient_conformance.adapters.autograd_impl import Autograd

SEEN: list[tuple[str, str, tuple[int, ...]]] = []  # (op, dtype, shape) of each call


def kernel(name, fn):
    """One 'kernel': operands checked to be flat and of the result's size."""
    def launch(*arrays, dtype, shape):
        size = math.prod(shape)
        for a in arrays:
            assert np.ndim(getval(a)) == 1, f"{name}: operand of shape {np.shape(getval(a))}"
            if name != "gather":
                assert np.size(getval(a)) == size, f"{name}: {np.size(getval(a))} != {size}"
        out = fn(*arrays, dtype=dtype, size=size)
        assert np.shape(getval(out)) == (size,) and getval(out).dtype == dtype, name
        SEEN.append((name, np.dtype(dtype).name, tuple(shape)))
        return out
    return launch


OPS = {name: kernel(name, fn) for name, fn in {
    "add": lambda a, b, **k: anp.add(a, b), "mul": lambda a, b, **k: anp.multiply(a, b),
    "max": lambda a, b, **k: anp.maximum(a, b),
    "idiv": lambda a, b, **k: np.trunc(a / b).astype(np.int32),  # as autograd_impl's
    "mod": lambda a, b, **k: np.fmod(a, b),
    "shl": lambda a, b, **k: np.left_shift(a, b), "shr": lambda a, b, **k: np.right_shift(a, b),
    "and": lambda a, b, **k: np.bitwise_and(a, b), "or": lambda a, b, **k: np.bitwise_or(a, b),
    "xor": lambda a, b, **k: np.bitwise_xor(a, b),
    "cmplt": lambda a, b, **k: anp.less(a, b), "cmpne": lambda a, b, **k: anp.not_equal(a, b),
    "recip": lambda a, **k: anp.reciprocal(a), "exp2": lambda a, **k: anp.exp2(a),
    "log2": lambda a, **k: anp.log2(a), "sqrt": lambda a, **k: anp.sqrt(a),
    "sin": lambda a, **k: anp.sin(a), "where": lambda c, a, b, **k: anp.where(c, a, b),
    "detach": lambda a, **k: getval(a),
    "cast": lambda a, dtype, size: anp.array(a).astype(dtype),  # as autograd_impl's
    "bitcast": lambda a, dtype, size: getval(a).view(dtype),
    "gather": lambda a, index, **k: a[index],
}.items()}


class FlatKernels(Autograd):
    """The autograd adapter's values, numbers and derivatives, on the flat path."""

    name, version, flat = "flat-kernels", "1", True
    ops = OPS

    def tensor(self, array):
        assert array.ndim == 1, f"tensor of shape {array.shape}"
        return array


FRAMEWORK = FlatKernels()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
