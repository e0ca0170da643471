// TensorFlow.js 4.22 as an implementation of the IR, on the Node adapter kit (../kit.mjs),
// speaking the suite's JSON-lines protocol with the program as JSON (SPEC.md, "The protocol"
// and "Adapters"):
//
//   --impl="cmd:node adapters/tfjs/server.mjs"
//
// The pure JavaScript CPU backend, float32. The kit runs the program eagerly, statement by
// statement, on TensorFlow.js's tensors: every value and every derivative is its own.
//
// - TensorFlow.js differentiates functions: `tf.grad(f)(x)`, which the kit hands the function
//   that recomputes y from a new x; a gradient inside it is again tf.grad, which is how
//   TensorFlow.js nests.
// - TensorFlow.js has no stopGradient: detach is a tf.customGrad whose gradient is zeros.
// - It has no exp2, log2, shifts, bit casts, or bitwise ops on integers: exp2 is
//   `tf.pow(2, a)`, log2 is `tf.log(a) / ln 2`; shifts and bit casts are declared
//   unsupported, and and/or/xor of i32 raise (a rejection).
import { register, createRequire } from 'node:module';

import { serve } from '../kit.mjs';

register('./hooks.mjs', import.meta.url);
// tfjs-core's Node platform calls require(): give the ES module build one.
globalThis.require = createRequire(import.meta.url);

const tf = await import('@tensorflow/tfjs-core');
await import('@tensorflow/tfjs-core/dist/register_all_gradients');
// Tensor methods (x.reshape(...)): some of its gradients call them.
await import('@tensorflow/tfjs-core/dist/public/chained_ops/register_all_chained_ops');
await import('@tensorflow/tfjs-backend-cpu');
await tf.setBackend('cpu');

const DTYPES = { f32: 'float32', i32: 'int32', bool: 'bool' };
const detach = tf.customGrad((a) => ({ value: a.clone(), gradFunc: (dy) => tf.zerosLike(dy) }));
const shapeOf = (shape) => Array.isArray(shape) ? shape : [shape];

function bitwise(name) {
  const logical = { and: tf.logicalAnd, or: tf.logicalOr, xor: tf.logicalXor }[name];
  return ([a, b]) => {
    if (a.dtype !== 'bool') throw new Error(`TensorFlow.js has no bitwise ${name} on integers`);
    return logical(a, b);
  };
}

function reduce([a], { attrs }) {
  const axes = attrs.axis === undefined ? [...Array(a.rank).keys()] : shapeOf(attrs.axis);
  if (!axes.length) return a.clone();
  const fn = { add: tf.sum, max: tf.max, mul: tf.prod }[attrs.op];
  return tf.cast(fn(a, axes, attrs.axis !== undefined), a.dtype);
}

const OPS = {
  add: ([a, b]) => tf.add(a, b), mul: ([a, b]) => tf.mul(a, b),
  max: ([a, b]) => tf.maximum(a, b),
  idiv: ([a, b]) => tf.floorDiv(a, b), mod: ([a, b]) => tf.mod(a, b),
  and: bitwise('and'), or: bitwise('or'), xor: bitwise('xor'),
  cmplt: ([a, b]) => tf.less(a, b), cmpne: ([a, b]) => tf.notEqual(a, b),
  recip: ([a]) => tf.reciprocal(a), exp2: ([a]) => tf.pow(tf.scalar(2, 'float32'), a),
  log2: ([a]) => tf.div(tf.log(a), tf.scalar(Math.LN2, 'float32')),
  sqrt: ([a]) => tf.sqrt(a), sin: ([a]) => tf.sin(a), where: ([c, a, b]) => tf.where(c, a, b),
  detach: ([a]) => detach(a), reduce,
  cast: ([a], { attrs }) => tf.cast(a, DTYPES[attrs.dtype]),
  expand: ([a], { attrs }) => tf.broadcastTo(a, shapeOf(attrs.shape)),
  reshape: ([a], { attrs }) => tf.reshape(a, shapeOf(attrs.shape)),
};

function fromBits(dtype, shape, bits) {
  if (dtype === 'f32') return tf.tensor(new Float32Array(bits.buffer), shape, 'float32');
  if (dtype === 'i32') return tf.tensor(new Int32Array(bits.buffer), shape, 'int32');
  return tf.tensor(Array.from(bits, (b) => b !== 0), shape, 'bool');
}

function toBits(tensor, dtype) {
  const data = tf.cast(tensor, DTYPES[dtype]).dataSync();
  if (dtype === 'f32') return new Uint32Array(Float32Array.from(data).buffer);
  if (dtype === 'i32') return new Uint32Array(Int32Array.from(data).buffer);
  return Array.from(data, (b) => (b ? 1 : 0));
}

function withElement(a, i, e) {
  const flat = tf.reshape(a, [-1]);
  const parts = [tf.slice(flat, [0], [i]), tf.reshape(tf.cast(e, a.dtype), [1]),
    tf.slice(flat, [i + 1], [flat.size - i - 1])];
  return tf.reshape(tf.concat(parts), a.shape);
}

await serve({
  name: 'tensorflow.js',
  version: tf.version_core,
  // As the Python adapters claim (adapters/eager.py): exp2, log2 and sin within 2 ulps, and
  // no bit-exact gradients.
  capabilities: { unsupported: ['shl', 'shr', 'bitcast'], ulp: { exp2: 2, log2: 2, sin: 2 },
    bit_exact_gradients: false },
  ops: OPS,
  fromBits,
  toBits,
  element: (a, i) => tf.reshape(tf.slice(tf.reshape(a, [-1]), [i], [1]), []),
  withElement,
  broadcast: (e, { shape, dtype }) => tf.broadcastTo(tf.cast(e, DTYPES[dtype]), shape).clone(),
  gradFunction: (f, x) => tf.grad(f)(x),
  around: (run) => tf.tidy(run),
});
