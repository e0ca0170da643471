"""JAX as an implementation: `--impl=adapters.jax_impl`. SPEC.md, "Adapters".

CPU, float32: JAX's defaults here (x64 off; no accelerator on these machines). JAX
differentiates functions, not values, so this adapter keeps, for every value, the op and
operands that made it. `gradient y x` is then
`jax.grad(f)(x)`, where f recomputes y from a new x along that record. Inside f, detach is
`jax.lax.stop_gradient`, and a gradient is again `jax.grad`, which is how JAX nests. The
record only tells JAX what function to differentiate: every value and every derivative is
JAX's own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

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

NAME = "jax"
VERSION = jax.__version__
CAPABILITIES = FRAMEWORK_CAPABILITIES
DTYPES = {"f32": jnp.float32, "i32": jnp.int32, "bool": jnp.bool_}



def _reduce(a, attrs):
    axis = attrs.get("axis")
    dims = reduce_axes(attrs, a.ndim)
    keep = axis is not None
    fn = {"add": jnp.sum, "max": jnp.max, "mul": jnp.prod}[attrs["op"]]
    # A max over nothing raises in JAX (no identity): its answer, passed on.
    return fn(a, axis=dims, keepdims=keep).astype(a.dtype) if dims else a


OPS = {
    "add": jnp.add, "mul": jnp.multiply, "max": jnp.maximum,
    "idiv": lambda a, b: jax.lax.div(a, b), "mod": lambda a, b: jax.lax.rem(a, b),
    "shl": jax.lax.shift_left, "shr": jax.lax.shift_right_arithmetic,
    "and": jnp.bitwise_and, "or": jnp.bitwise_or, "xor": jnp.bitwise_xor,
    "cmplt": jnp.less, "cmpne": jnp.not_equal,
    "recip": jnp.reciprocal, "exp2": jnp.exp2, "log2": jnp.log2, "sqrt": jnp.sqrt,
    "sin": jnp.sin, "where": jnp.where, "detach": jax.lax.stop_gradient,
    "reduce": _reduce,
    "cast": lambda a, attrs: a.astype(DTYPES[attrs["dtype"]]),
    "bitcast": lambda a, attrs: jax.lax.bitcast_convert_type(a, DTYPES[attrs["dtype"]]),
    "expand": lambda a, attrs: jnp.broadcast_to(a, shape_of(attrs["shape"])),
    "reshape": lambda a, attrs: jnp.reshape(a, shape_of(attrs["shape"])),
    "element": lambda a, attrs: jnp.reshape(a, (-1,))[attrs["index"]],
    "with_element": lambda a, e, attrs: jnp.reshape(
        jnp.reshape(a, (-1,)).at[attrs["index"]].set(e), a.shape),
    "broadcast": lambda a, attrs: jnp.broadcast_to(a.astype(DTYPES[attrs["dtype"]]),
                                                   attrs["shape"]),
}
WITH_ATTRS = {"reduce", "cast", "bitcast", "expand", "reshape", "element", "with_element",
              "broadcast"}


def _apply(op, arrays, attrs):
    fn = OPS[op]
    return fn(*arrays, attrs) if op in WITH_ATTRS else fn(*arrays)


def _grad_array(y: Value, x: Value, x_array, outer=None):
    """jax.grad of y as a function of x, at x_array; inside an outer function (`outer`: its
    variable and the array it was given), the outer variable stays what it was given."""
    def f(new_x):
        bound = {id(outer[0]): outer[1]} if outer is not None and outer[0] is not x else {}
        bound[id(x)] = new_x
        return recompute(y, bound, _apply, lambda node, gx_array, memo: _grad_array(
            node.attrs["y"], node.attrs["x"], gx_array, outer=(x, new_x)))

    return jax.grad(f)(x_array)


class Jax(RecordingBackend):
    name, version = NAME, VERSION
    WITH_ATTRS = frozenset(WITH_ATTRS)  # the table above, for the recording backend

    def literal(self, operand):
        if operand.kind == "f32":
            return Value(jnp.asarray(np.uint32(operand.value).view(np.float32)))
        if operand.kind == "bool":
            return Value(jnp.asarray(bool(operand.value)))
        return Value(jnp.asarray(int(operand.value), jnp.int32))

    def from_numpy(self, array, dtype):
        return Value(jnp.asarray(np.array(array, NUMPY[dtype])))

    def to_numpy(self, value, dtype, shape):
        return np.asarray(value.array).astype(NUMPY[dtype]).reshape(shape)

    def apply(self, op, arrays, attrs):
        return _apply(op, arrays, attrs)

    def grad_array(self, y, x):
        return _grad_array(y, x, x.array)

    def index(self, value):
        return int(np.asarray(value.array))


def build(source: str):
    return build_with(source, Jax())
