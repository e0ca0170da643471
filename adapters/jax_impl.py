"""JAX as an implementation: `--impl=adapters.jax_impl`. docs/adapters.md, "Adapters".

CPU, float32: JAX's defaults here (x64 off; no accelerator on these machines), on the adapter
kit (adapters/kit.py). JAX differentiates functions, not values, so this is a functional
framework: the kit keeps, for every value, the op and operands that made it, and `gradient y
x` is `jax.grad(f)(x)`, where f recomputes y from a new x along that record. Inside f, detach
is `jax.lax.stop_gradient`, and a gradient is again `jax.grad`, which is how JAX nests. The
record only tells JAX what function to differentiate: every value and every derivative is
JAX's own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gradient_conformance.adapters.kit import FRAMEWORK_CAPABILITIES, FunctionalFramework


def _reduce(a, op, axes, keepdims):
    # A max over nothing raises in JAX (no identity): its answer, passed on.
    fn = {"add": jnp.sum, "max": jnp.max, "mul": jnp.prod}[op]
    return fn(a, axis=axes, keepdims=keepdims).astype(a.dtype)


OPS = {
    "add": jnp.add, "mul": jnp.multiply, "max": jnp.maximum,
    "idiv": jax.lax.div, "mod": jax.lax.rem,
    "shl": jax.lax.shift_left, "shr": jax.lax.shift_right_arithmetic,
    "and": jnp.bitwise_and, "or": jnp.bitwise_or, "xor": jnp.bitwise_xor,
    "cmplt": jnp.less, "cmpne": jnp.not_equal,
    "recip": jnp.reciprocal, "exp2": jnp.exp2, "log2": jnp.log2, "sqrt": jnp.sqrt,
    "sin": jnp.sin, "where": jnp.where, "detach": jax.lax.stop_gradient, "reduce": _reduce,
    "cast": lambda a, dtype: a.astype(dtype),
    "bitcast": lambda a, dtype: jax.lax.bitcast_convert_type(a, dtype),
    "expand": lambda a, shape: jnp.broadcast_to(a, shape),
    "reshape": lambda a, shape: jnp.reshape(a, shape),
}
DTYPES = {"f32": jnp.float32, "i32": jnp.int32, "bool": jnp.bool_}


class Jax(FunctionalFramework):
    name, version = "jax", jax.__version__
    # JAX refuses what it cannot differentiate with a TypeError ("Gradient only defined for
    # scalar-output functions"; "grad requires real- or complex-valued inputs"): its
    # deliberate answer, so named (impl-protocol.md).
    capabilities = FRAMEWORK_CAPABILITIES | {"rejection": ["TypeError"]}
    ops, dtypes = OPS, DTYPES

    def tensor(self, array):
        return jnp.asarray(array)

    def numpy(self, value):
        return np.asarray(value)

    def set_element(self, a, index, e):
        return jnp.reshape(jnp.reshape(a, (-1,)).at[index].set(e), a.shape)

    def grad_function(self, f, x):
        return jax.grad(f)(x)


FRAMEWORK = Jax()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
