"""NVIDIA Warp as an implementation: `--impl=adapters.warp_impl`. docs/adapters.md, "Adapters".

Warp, on the CPU, has arrays and compiled kernels, no tensor ops: this is a flat system on
the adapter kit (adapters/kit.py), which lowers the IR's shapes onto one kernel per IR op and
a gather. Each kernel is generic over its dtypes, and Warp compiles an overload per dtype the
first time it is launched with it. Gradients come from `wp.Tape`: y recomputed from a fresh
leaf copy of x under a tape, `tape.backward`, and the leaf's `.grad`; the adjoints are the
ones Warp generates for each kernel (a gather's is an atomic add). A tape's gradient is not
itself on a tape, so gradients of gradients are declared unsupported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from gradient_conformance.adapters.kit import FRAMEWORK_CAPABILITIES, FunctionalFramework

wp.config.quiet = True
wp.init()


def unary(fn, backward=True):
    @wp.kernel(module="unique", enable_backward=backward)
    def k(a: wp.array(dtype=Any), out: wp.array(dtype=Any)):
        i = wp.tid()
        out[i] = fn(a[i])
    return k


def binary(fn):
    @wp.kernel(module="unique")
    def k(a: wp.array(dtype=Any), b: wp.array(dtype=Any), out: wp.array(dtype=Any)):
        i = wp.tid()
        out[i] = fn(a[i], b[i])
    return k


@wp.kernel(module="unique")
def _where(c: wp.array(dtype=wp.bool), a: wp.array(dtype=Any), b: wp.array(dtype=Any),
           out: wp.array(dtype=Any)):
    i = wp.tid()
    out[i] = wp.where(c[i], a[i], b[i])


@wp.kernel(module="unique")
def _gather(a: wp.array(dtype=Any), index: wp.array(dtype=wp.int32), out: wp.array(dtype=Any)):
    i = wp.tid()
    out[i] = a[index[i]]


# One Warp function per IR op, as a user of Warp writes them; each kernel below applies one.
# Named apart from Warp's builtins: a function `add` doing `a + b` would call itself.
@wp.func
def ir_add(a: Any, b: Any): return a + b
@wp.func
def ir_mul(a: Any, b: Any): return a * b
@wp.func
def ir_max(a: Any, b: Any): return wp.max(a, b)
@wp.func
def ir_idiv(a: Any, b: Any): return a / b
@wp.func
def ir_mod(a: Any, b: Any): return a % b
@wp.func
def ir_shl(a: Any, b: Any): return a << b
@wp.func
def ir_shr(a: Any, b: Any): return a >> b
@wp.func
def ir_and(a: Any, b: Any): return a & b
@wp.func
def ir_or(a: Any, b: Any): return a | b
@wp.func
def ir_xor(a: Any, b: Any): return a ^ b
@wp.func
def ir_cmplt(a: Any, b: Any): return a < b
@wp.func
def ir_cmpne(a: Any, b: Any): return a != b
@wp.func
def ir_recip(a: Any): return type(a)(1.0) / a
@wp.func
def ir_exp2(a: Any): return wp.pow(type(a)(2.0), a)
@wp.func
def ir_log2(a: Any): return wp.log2(a)
@wp.func
def ir_sqrt(a: Any): return wp.sqrt(a)
@wp.func
def ir_sin(a: Any): return wp.sin(a)
@wp.func
def ir_same(a: Any): return a
@wp.func
def ir_to_float32(a: Any): return wp.float32(a)
@wp.func
def ir_to_int32(a: Any): return wp.int32(a)
@wp.func
def ir_to_bool(a: Any): return wp.bool(a)


BINARY = ("add", "mul", "max", "idiv", "mod", "shl", "shr", "and", "or", "xor", "cmplt", "cmpne")
KERNELS = {**{op: binary(globals()[f"ir_{op}"]) for op in BINARY},
           **{op: unary(globals()[f"ir_{op}"]) for op in ("recip", "exp2", "log2", "sqrt", "sin")},
           "detach": unary(ir_same, backward=False), "where": _where, "gather": _gather}
CASTS = {wp.float32: unary(ir_to_float32), wp.int32: unary(ir_to_int32), wp.bool: unary(ir_to_bool)}


def launcher(kernel):
    """An op of the kit's flat table: `kernel` launched over a new array of the result."""
    def launch(*arrays, dtype, shape):
        out = wp.empty(int(np.prod(shape)), dtype=dtype, requires_grad=dtype == wp.float32)
        wp.launch(kernel, dim=out.shape[0], inputs=[*arrays, out])
        return out
    return launch


OPS = {op: launcher(k) for op, k in KERNELS.items()}
OPS["cast"] = lambda a, dtype, shape: launcher(CASTS[dtype])(a, dtype=dtype, shape=shape)
OPS["bitcast"] = lambda a, dtype, shape: a if a.dtype == dtype else wp.array(  # on the host
    a.numpy().view(wp.dtype_to_numpy(dtype)))
# Warp's &, | and ^ have no bool overloads; a tape's gradient is on no tape; its integer
# division is the CPU's, which traps (SIGFPE) on a divisor of zero and on -2^31 / -1.
CAPABILITIES = {**FRAMEWORK_CAPABILITIES, "integer_division_traps": True, "unsupported": [
    "and:bool", "or:bool", "xor:bool", "higher_order"]}


class Warp(FunctionalFramework):
    name, version, flat = "warp", wp.config.version, True
    ops, dtypes = OPS, {"f32": wp.float32, "i32": wp.int32, "bool": wp.bool}
    capabilities = CAPABILITIES

    def tensor(self, array):
        return wp.array(array, dtype=wp.dtype_from_numpy(array.dtype))

    def numpy(self, value):
        return value.numpy()

    def grad_function(self, f, x):
        leaf = wp.clone(x, requires_grad=True)
        with wp.Tape() as tape:
            y = f(leaf)
        if y.requires_grad:  # else y does not depend on x: the leaf's gradient stays zeros
            tape.backward(grads={y: wp.ones(1, dtype=wp.float32)})
        return wp.clone(leaf.grad)


FRAMEWORK = Warp()
NAME, VERSION = FRAMEWORK.name, FRAMEWORK.version
build = FRAMEWORK.build
