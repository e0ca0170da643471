"""TensorFlow as an implementation: `--impl=adapters.tensorflow_impl`. docs/adapters.md, "Adapters".

Eager mode, float32 on the CPU, on the adapter kit (adapters/kit.py). The whole run happens
inside one persistent `tf.GradientTape`, which watches every f32 input, as a user's training
step watches its variables. `gradient y x` is `tape.gradient(y, x,
unconnected_gradients=ZERO)`, computed inside the tape so that a gradient of a gradient is
recorded too (TensorFlow supports this for persistent tapes). detach is `tf.stop_gradient`.
What the tape refuses, or answers with None, is TensorFlow's own answer. TensorFlow has no
exp2 or log2 op, so they are written as a TensorFlow user writes them, `pow(2, a)` and
`log(a) / log(2)`.
"""

from __future__ import annotations

import contextlib
from typing import Any

import tensorflow as tf

from gradient_conformance.adapters.kit import Framework


def _reduce(a, op, axes, keepdims):
    fn = {"add": tf.reduce_sum, "max": tf.reduce_max, "mul": tf.reduce_prod}[op]
    return fn(a, axis=list(axes), keepdims=keepdims)


def _bits(bitwise, logical):
    """A bitwise op, or its logical twin on bools: TensorFlow keeps them apart."""
    return lambda a, b: logical(a, b) if a.dtype == tf.bool else bitwise(a, b)


def _same_dtypes(op):
    """TensorFlow's add, mul and max convert a Python scalar, but not another dtype."""
    def checked(a, b):
        if a.dtype != b.dtype:
            raise TypeError("operands of different dtypes")
        return op(a, b)
    return checked


OPS = {
    "add": _same_dtypes(tf.add), "mul": _same_dtypes(tf.multiply),
    "max": _same_dtypes(tf.maximum), "idiv": tf.truncatediv, "mod": tf.truncatemod,
    "shl": tf.bitwise.left_shift, "shr": tf.bitwise.right_shift,
    "and": _bits(tf.bitwise.bitwise_and, tf.logical_and),
    "or": _bits(tf.bitwise.bitwise_or, tf.logical_or),
    "xor": _bits(tf.bitwise.bitwise_xor, tf.math.logical_xor),
    "cmplt": tf.less, "cmpne": tf.not_equal, "recip": tf.math.reciprocal,
    "exp2": lambda a: tf.pow(tf.constant(2.0), a),
    "log2": lambda a: tf.math.log(a) / tf.math.log(tf.constant(2.0)),
    "sqrt": tf.sqrt, "sin": tf.sin, "where": tf.where, "detach": tf.stop_gradient,
    "reduce": _reduce,
    "cast": lambda a, dtype: tf.cast(a, dtype), "bitcast": lambda a, dtype: tf.bitcast(a, dtype),
    "expand": lambda a, shape: tf.broadcast_to(a, shape),
    "reshape": lambda a, shape: tf.reshape(a, shape),
}
DTYPES = {"f32": tf.float32, "i32": tf.int32, "bool": tf.bool}


class TensorFlow(Framework):
    name, version = "tensorflow", tf.__version__
    ops, dtypes = OPS, DTYPES
    tape: Any = None  # the GradientTape of the run under way (around_run)

    def tensor(self, array):
        return tf.constant(array)

    def numpy(self, value):
        return value.numpy()

    def watch(self, value):
        self.tape.watch(value)
        return value

    def set_element(self, a, index, e):
        flat = tf.reshape(a, [-1])
        updated = tf.tensor_scatter_nd_update(flat, [[index]], tf.reshape(e, [1]))
        return tf.reshape(updated, a.shape)

    @contextlib.contextmanager
    def around_run(self):
        try:
            with tf.GradientTape(persistent=True) as self.tape:
                yield
        finally:
            self.tape = None

    def grad(self, y, x):
        return self.tape.gradient(y, x, unconnected_gradients=tf.UnconnectedGradients.ZERO)


FRAMEWORK = TensorFlow()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
