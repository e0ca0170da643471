"""TensorFlow as an implementation: `--impl=adapters.tensorflow_impl`. SPEC.md, "Adapters".

Eager mode, float32 on the CPU. The whole run happens inside one persistent
`tf.GradientTape`, which watches every f32 input, as a user's training step watches its
variables. `gradient y x` is `tape.gradient(y, x, unconnected_gradients=ZERO)`, computed
inside the tape so that a gradient of a gradient is recorded too (TensorFlow supports this
for persistent tapes). detach is `tf.stop_gradient`. What the tape refuses, or answers with
None, is TensorFlow's own answer. TensorFlow has no exp2 or log2 op, so they are written as a
TensorFlow user writes them, `pow(2, a)` and `log(a) / log(2)`.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from gradient_conformance.adapters.eager import (
    FRAMEWORK_CAPABILITIES,
    NUMPY,
    Backend,
    Program,
    build_with,
    reduce_axes,
    shape_of,
)

NAME = "tensorflow"
VERSION = tf.__version__
CAPABILITIES = FRAMEWORK_CAPABILITIES
DTYPES = {"f32": tf.float32, "i32": tf.int32, "bool": tf.bool}



def _reduce(a, attrs):
    axis = attrs.get("axis")
    dims = list(reduce_axes(attrs, len(a.shape)))
    if not dims:
        return tf.identity(a)
    fn = {"add": tf.reduce_sum, "max": tf.reduce_max, "mul": tf.reduce_prod}[attrs["op"]]
    return fn(a, axis=dims, keepdims=axis is not None)


OPS = {
    "add": tf.add, "mul": tf.multiply, "max": tf.maximum,
    "idiv": lambda a, b: tf.truncatediv(a, b), "mod": lambda a, b: tf.truncatemod(a, b),
    "shl": tf.bitwise.left_shift, "shr": tf.bitwise.right_shift,
    "and": lambda a, b: tf.bitwise.bitwise_and(a, b) if a.dtype != tf.bool
    else tf.logical_and(a, b),
    "or": lambda a, b: tf.bitwise.bitwise_or(a, b) if a.dtype != tf.bool
    else tf.logical_or(a, b),
    "xor": lambda a, b: tf.bitwise.bitwise_xor(a, b) if a.dtype != tf.bool
    else tf.math.logical_xor(a, b),
    "cmplt": tf.less, "cmpne": tf.not_equal,
    "recip": tf.math.reciprocal, "exp2": lambda a: tf.pow(tf.constant(2.0), a),
    "log2": lambda a: tf.math.log(a) / tf.math.log(tf.constant(2.0)),
    "sqrt": tf.sqrt, "sin": tf.sin, "where": tf.where, "detach": tf.stop_gradient,
}
WITH_ATTRS = {
    "reduce": _reduce,
    "cast": lambda a, attrs: tf.cast(a, DTYPES[attrs["dtype"]]),
    "bitcast": lambda a, attrs: tf.bitcast(a, DTYPES[attrs["dtype"]]),
    "expand": lambda a, attrs: tf.broadcast_to(a, shape_of(attrs["shape"])),
    "reshape": lambda a, attrs: tf.reshape(a, shape_of(attrs["shape"])),
}


class TensorFlow(Backend):
    name, version = NAME, VERSION

    def __init__(self):
        self.tape = None

    def literal(self, operand):
        if operand.kind == "f32":
            return tf.constant(np.uint32(operand.value).view(np.float32))
        if operand.kind == "bool":
            return tf.constant(bool(operand.value))
        return tf.constant(int(operand.value), tf.int32)

    def from_numpy(self, array, dtype):
        t = tf.constant(np.array(array, NUMPY[dtype]))
        if dtype == "f32":
            self.tape.watch(t)
        return t

    def to_numpy(self, value, dtype, shape):
        return np.asarray(value.numpy()).astype(NUMPY[dtype]).reshape(shape)

    def op(self, name, operands, attrs):
        if name in WITH_ATTRS:
            return WITH_ATTRS[name](operands[0], attrs)
        if name in ("add", "mul", "max") and operands[0].dtype != operands[1].dtype:
            raise TypeError("operands of different dtypes")
        return OPS[name](*operands)

    def element(self, value, index):
        return tf.reshape(value, [-1])[index]

    def with_element(self, value, index, element):
        flat = tf.reshape(value, [-1])
        updated = tf.tensor_scatter_nd_update(flat, [[index]], tf.reshape(element, [1]))
        return tf.reshape(updated, value.shape)

    def broadcast(self, value, shape, dtype):
        return tf.broadcast_to(tf.cast(value, DTYPES[dtype]), shape_of(shape))

    def grad(self, y, x):
        return self.tape.gradient(y, x, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    def index(self, value):
        return int(value.numpy())


class Taped(Program):
    """A program whose every run happens inside one persistent tape."""

    def run(self, buffers):
        with tf.GradientTape(persistent=True) as tape:
            self.backend.tape = tape
            try:
                return super().run(buffers)
            finally:
                self.backend.tape = None


def build(source: str):
    return build_with(source, TensorFlow(), Taped)
