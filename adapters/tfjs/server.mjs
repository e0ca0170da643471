// TensorFlow.js 4.22 as an implementation of the IR, speaking the suite's JSON-lines protocol
// on stdin/stdout (SPEC.md, "The protocol" and "Adapters"):
//
//   --impl="cmd:node adapters/tfjs/server.mjs"
//
// The pure JavaScript CPU backend, float32. The server parses the IR text itself, and runs it
// eagerly statement by statement, as the Python adapters' eager interpreter does
// (adapters/eager.py): every value and every derivative is TensorFlow.js's own. It checks the
// IR's structure itself (structure.mjs: names, dtypes, shapes, scopes, calls), as the Python
// adapters have the reference do; whether a gradient is accepted is left to TensorFlow.js.
// `build` runs the program once on zeros, so that what TensorFlow.js refuses is refused at
// build.
//
// - TensorFlow.js differentiates functions: `tf.grad(f)(x)`. So every value keeps the op and
//   operands that made it, and `gradient y x` is tf.grad of the function that recomputes y
//   from a new x along that record; a gradient inside it is again tf.grad, which is how
//   TensorFlow.js nests.
// - TensorFlow.js has no stopGradient: detach is a tf.customGrad whose gradient is zeros.
// - It has no exp2, log2, shifts, bit casts, or bitwise ops on integers: exp2 is
//   `tf.pow(2, a)`, log2 is `tf.log(a) / ln 2`, and the rest are declared unsupported.
// - Literals are read with JavaScript's parseFloat, then Math.fround: a decimal rounded to
//   binary64 first, then to f32, as a JavaScript user's literal is.
import { register } from 'node:module';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

import { check, IRError } from './structure.mjs';

register('./hooks.mjs', import.meta.url);
// tfjs-core's Node platform calls require(): give the ES module build one.
globalThis.require = createRequire(import.meta.url);
// What TensorFlow.js prints must not look like replies: replies go to the real stdout only.
const reply = (object) => process.stdout.write(JSON.stringify(object) + '\n');
console.log = console.warn = console.info = (...args) => process.stderr.write(args.join(' ') + '\n');

const tf = await import('@tensorflow/tfjs-core');
await import('@tensorflow/tfjs-core/dist/register_all_gradients');
// Tensor methods (x.reshape(...)): some of its gradients call them.
await import('@tensorflow/tfjs-core/dist/public/chained_ops/register_all_chained_ops');
await import('@tensorflow/tfjs-backend-cpu');
await tf.setBackend('cpu');

const NAME = 'tensorflow.js';
const VERSION = tf.version_core;
// As the Python adapters claim (adapters/eager.py): exp2, log2 and sin within 2 ulps, and
// no bit-exact gradients.
const CAPABILITIES = {
  unsupported: ['shl', 'shr', 'bitcast'],
  ulp: { exp2: 2, log2: 2, sin: 2 },
  bit_exact_gradients: false,
};
const DTYPES = { f32: 'float32', i32: 'int32', bool: 'bool' };

class IndexOutOfRange extends Error {}

// --- the text ------------------------------------------------------------------------------

function parseLiteral(text, line) {
  if (text === 'true' || text === 'false') return { kind: 'bool', value: text === 'true' };
  if (/^[-+]?(inf|nan)$/.test(text) || /[.eE]/.test(text) && !/^[-+]?\d+$/.test(text)) {
    const value = text.replace(/^([-+]?)inf$/, '$1Infinity').replace(/^[-+]?nan$/, 'NaN');
    const number = Number(value);
    if (Number.isNaN(number) && !/nan$/.test(text)) throw new IRError(`line ${line}: bad literal ${text}`);
    return { kind: 'f32', value: Math.fround(number) };
  }
  if (/^[-+]?\d+$/.test(text)) {
    const value = Number(text);
    if (value < -(2 ** 31) || value >= 2 ** 31) throw new IRError(`line ${line}: i32 literal ${text} out of range`);
    return { kind: 'i32', value };
  }
  throw new IRError(`line ${line}: cannot read ${JSON.stringify(text)}`);
}

function parseValue(text) {
  if (/^\[.*\]$/.test(text)) {
    const inner = text.slice(1, -1).trim();
    return inner === '' ? [] : inner.split(',').map((x) => Number(x.trim()));
  }
  return /^-?\d+$/.test(text) ? Number(text) : text;
}

function parse(source) {
  const statements = [];
  source.split('\n').forEach((raw, k) => {
    const line = k + 1;
    const text = raw.replace(/#.*/, '').trim();
    if (!text) return;
    const tokens = text.split(/\s+/);
    let target = null;
    if (tokens.length > 1 && tokens[1] === '=') {
      target = tokens[0];
      tokens.splice(0, 2);
    }
    const [op, ...rest] = tokens;
    if (!/^[a-z][a-z0-9]*$/.test(op ?? '')) throw new IRError(`line ${line}: ${JSON.stringify(op)} is no op`);
    const operands = [];
    const attrs = {};
    for (const token of rest) {
      const eq = token.indexOf('=');
      if (eq > 0 && !token.startsWith('%')) attrs[token.slice(0, eq)] = parseValue(token.slice(eq + 1));
      else if (Object.keys(attrs).length) throw new IRError(`line ${line}: operand ${token} after an attribute`);
      else if (/^[%@][A-Za-z_][A-Za-z0-9_.]*$/.test(token)) operands.push({ kind: 'name', text: token });
      else operands.push(parseLiteral(token, line));
    }
    statements.push({ line, target, op, operands, attrs });
  });
  return statements;
}

function blocks(statements) {
  const root = { head: null, body: [] };
  const stack = [];
  let current = root;
  for (const s of statements) {
    if (s.op === 'range' || s.op === 'def') {
      const inner = { head: s, body: [] };
      current.body.push(inner);
      stack.push(current);
      current = inner;
    } else if (s.op === 'end') {
      if (!stack.length) throw new IRError(`line ${s.line}: end without range or def`);
      current.closedBy = s.operands[0]?.text;
      current = stack.pop();
    } else current.body.push(s);
  }
  if (stack.length) throw new IRError(`line ${current.head.line}: ${current.head.op} without its end`);
  return root;
}

// --- values, and how they were made ------------------------------------------------------------

class Value {
  constructor(tensor, op = null, operands = [], attrs = null) {
    this.tensor = tensor; this.op = op; this.operands = operands; this.attrs = attrs;
  }
}

const detach = tf.customGrad((a) => ({ value: a.clone(), gradFunc: (dy) => tf.zerosLike(dy) }));
const reduceAxes = (attrs, rank) => attrs.axis === undefined ? [...Array(rank).keys()]
  : (Array.isArray(attrs.axis) ? attrs.axis : [attrs.axis]);
const shapeOf = (shape) => Array.isArray(shape) ? shape : [shape];

function bitwise(name) {
  const logical = { and: tf.logicalAnd, or: tf.logicalOr, xor: tf.logicalXor }[name];
  return (a, b) => {
    if (a.dtype !== 'bool') throw new Error(`TensorFlow.js has no bitwise ${name} on integers`);
    return logical(a, b);
  };
}

const OPS = {
  add: (a, b) => tf.add(a, b), mul: (a, b) => tf.mul(a, b), max: (a, b) => tf.maximum(a, b),
  idiv: (a, b) => tf.floorDiv(a, b), mod: (a, b) => tf.mod(a, b),
  and: bitwise('and'), or: bitwise('or'), xor: bitwise('xor'),
  cmplt: (a, b) => tf.less(a, b), cmpne: (a, b) => tf.notEqual(a, b),
  recip: (a) => tf.reciprocal(a), exp2: (a) => tf.pow(tf.scalar(2, 'float32'), a),
  log2: (a) => tf.div(tf.log(a), tf.scalar(Math.LN2, 'float32')),
  sqrt: (a) => tf.sqrt(a), sin: (a) => tf.sin(a), where: (c, a, b) => tf.where(c, a, b),
  detach: (a) => detach(a),
  reduce: (a, attrs) => {
    const axes = reduceAxes(attrs, a.rank);
    if (!axes.length) return a.clone();
    const keep = attrs.axis !== undefined;
    const fn = { add: tf.sum, max: tf.max, mul: tf.prod }[attrs.op];
    if (!fn) throw new IRError(`reduce op=${attrs.op}`);
    return tf.cast(fn(a, axes, keep), a.dtype);
  },
  cast: (a, attrs) => tf.cast(a, DTYPES[attrs.dtype]),
  expand: (a, attrs) => tf.broadcastTo(a, shapeOf(attrs.shape)),
  reshape: (a, attrs) => tf.reshape(a, shapeOf(attrs.shape)),
  element: (a, attrs) => tf.reshape(tf.slice(tf.reshape(a, [-1]), [attrs.index], [1]), []),
  withElement: (a, e, attrs) => {
    const flat = tf.reshape(a, [-1]);
    const i = attrs.index;
    const parts = [tf.slice(flat, [0], [i]), tf.reshape(tf.cast(e, a.dtype), [1]),
      tf.slice(flat, [i + 1], [flat.size - i - 1])];
    return tf.reshape(tf.concat(parts), a.shape);
  },
  broadcast: (a, attrs) => tf.broadcastTo(tf.cast(a, DTYPES[attrs.dtype]), attrs.shape).clone(),
};
const WITH_ATTRS = new Set(['reduce', 'cast', 'expand', 'reshape', 'element', 'broadcast']);

function apply(op, tensors, attrs) {
  const fn = OPS[op];
  if (!fn || CAPABILITIES.unsupported.includes(op)) throw new IRError(`unknown or unsupported op ${op}`);
  if (op === 'withElement') return fn(tensors[0], tensors[1], attrs);
  return WITH_ATTRS.has(op) ? fn(tensors[0], attrs) : fn(...tensors);
}

// v's tensor with the values bound (Value -> tensor) replaced, along the record; deepest first.
function recompute(v, bound) {
  const memo = new Map(bound);
  const stack = [v];
  while (stack.length) {
    const top = stack[stack.length - 1];
    if (memo.has(top)) { stack.pop(); continue; }
    if (top.op === null) { memo.set(top, top.tensor); stack.pop(); continue; }
    const pending = top.operands.filter((o) => !memo.has(o));
    if (pending.length) { stack.push(...pending); continue; }
    stack.pop();
    const tensors = top.operands.map((o) => memo.get(o));
    if (top.op === 'gradient') memo.set(top, gradTensor(top.attrs.y, top.attrs.x, tensors[0], bound));
    else memo.set(top, apply(top.op, tensors, top.attrs));
  }
  return memo.get(v);
}

// tf.grad of y as a function of x at xTensor; an outer function's variables stay bound.
function gradTensor(y, x, xTensor, outer = new Map()) {
  const f = (newX) => {
    const bound = new Map(outer);
    bound.set(x, newX);
    return recompute(y, bound);
  };
  return tf.grad(f)(xTensor);
}

// --- running a program -------------------------------------------------------------------------

class Program {
  constructor(source) {
    this.statements = parse(source);
    this.root = blocks(this.statements);
    check(this.root);
    this.slots = new Map();
    this.functions = new Map();
    for (const s of this.statements) {
      if (s.op === 'buffer') this.slots.set(s.target, { slot: s.attrs.slot, dtype: s.attrs.dtype, shape: shapeOf(s.attrs.shape ?? []) });
    }
    for (const b of this.root.body) if (b.head && b.head.op === 'def') this.functions.set(b.head.operands[0].text, b);
  }

  run(buffers) {
    const memory = new Map();
    for (const [name, { slot, dtype, shape }] of this.slots) {
      memory.set(name, new Value(tensorFrom(buffers[slot], dtype, shape)));
    }
    this.block(this.root, new Map(), memory);
    const out = {};
    for (const [name, { slot, dtype, shape }] of this.slots) out[slot] = bufferOf(memory.get(name).tensor, dtype, shape);
    return out;
  }

  block(block, env, memory) {
    for (const s of block.body) {
      if (s.head) {
        if (s.head.op === 'range') {
          const n = s.head.operands[0].value;
          for (let i = 0; i < n; i++) {
            env.set(s.head.target, new Value(tf.scalar(i, 'int32')));
            this.block(s, env, memory);
          }
        }
        continue;
      }
      if (s.op === 'return') return this.value(s.operands[0], env, s);
      if (s.op === 'buffer') continue;
      if (s.op === 'store') {
        const name = s.operands[0].text;
        const slot = this.slot(name, s);
        const value = this.value(s.operands[1], env, s);
        if (s.operands.length === 3) {
          const i = this.index(s.operands[2], env, slot, name, s);
          memory.set(name, make('withElement', [memory.get(name), value], { index: i }));
        } else memory.set(name, make('broadcast', [value], { shape: slot.shape, dtype: slot.dtype }));
        continue;
      }
      let value;
      if (s.op === 'load') {
        const name = s.operands[0].text;
        const slot = this.slot(name, s);
        value = s.operands.length === 1 ? memory.get(name)
          : make('element', [memory.get(name)], { index: this.index(s.operands[1], env, slot, name, s) });
      } else if (s.op === 'call') {
        const f = this.functions.get(s.operands[0].text);
        if (!f) throw new IRError(`line ${s.line}: no function ${s.operands[0].text}`);
        const inner = new Map();
        f.head.operands.slice(1).forEach((p, k) => inner.set(p.text, this.value(s.operands[k + 1], env, s)));
        value = this.block(f, inner, memory);
      } else if (s.op === 'gradient') {
        const [y, x] = s.operands.map((o) => this.value(o, env, s));
        value = new Value(gradTensor(y, x, x.tensor), 'gradient', [x], { y, x });
      } else {
        value = make(s.op, s.operands.map((o) => this.value(o, env, s)), WITH_ATTRS.has(s.op) ? s.attrs : null);
      }
      if (s.target) env.set(s.target, value);
    }
    return null;
  }

  slot(name, s) {
    const slot = this.slots.get(name);
    if (!slot) throw new IRError(`line ${s.line}: ${name} is no buffer`);
    return slot;
  }

  value(operand, env, s) {
    if (operand.kind === 'name') {
      if (!env.has(operand.text)) throw new IRError(`line ${s.line}: undefined name ${operand.text}`);
      return env.get(operand.text);
    }
    const dtype = DTYPES[operand.kind];
    return new Value(dtype === 'bool' ? tf.scalar(operand.value, 'bool') : tf.scalar(operand.value, dtype));
  }

  index(operand, env, slot, name, s) {
    const i = this.value(operand, env, s).tensor.dataSync()[0];
    const size = slot.shape.reduce((a, b) => a * b, 1);
    if (!(i >= 0 && i < size)) throw new IndexOutOfRange(`index ${i} out of range for ${name} of ${size} elements`);
    return i;
  }
}

function make(op, operands, attrs = null) {
  return new Value(apply(op, operands.map((o) => o.tensor), attrs), op, operands, attrs);
}

// --- buffers as the protocol carries them: raw 32-bit patterns ------------------------------------

function tensorFrom(buffer, dtype, shape) {
  const bits = Uint32Array.from(buffer ? buffer.bits : new Array(shape.reduce((a, b) => a * b, 1)).fill(0));
  if (dtype === 'f32') return tf.tensor(new Float32Array(bits.buffer), shape, 'float32');
  if (dtype === 'i32') return tf.tensor(new Int32Array(bits.buffer), shape, 'int32');
  return tf.tensor(Array.from(bits, (b) => b !== 0), shape, 'bool');
}

function bufferOf(tensor, dtype, shape) {
  const data = tf.cast(tensor, DTYPES[dtype]).dataSync();
  let bits;
  if (dtype === 'f32') bits = Array.from(new Uint32Array(Float32Array.from(data).buffer));
  else if (dtype === 'i32') bits = Array.from(new Uint32Array(Int32Array.from(data).buffer));
  else bits = Array.from(data, (b) => (b ? 1 : 0));
  return { dtype, shape, bits };
}

// --- the protocol ----------------------------------------------------------------------------

const programs = new Map();
const KEPT = 64;
let described = false;

function zeros(program) {
  const buffers = {};
  for (const { slot, shape } of program.slots.values()) {
    buffers[slot] = { bits: new Array(shape.reduce((a, b) => a * b, 1)).fill(0) };
  }
  return buffers;
}

function answer(request) {
  if ('build' in request) {
    const program = new Program(request.build);
    try {
      tf.tidy(() => { program.run(zeros(program)); });
    } catch (problem) {
      if (!(problem instanceof IndexOutOfRange)) throw problem;
    }
    programs.set(request.id, program);
    for (const old of [...programs.keys()].slice(0, -KEPT)) programs.delete(old);
    return { ok: true };
  }
  if ('run' in request) {
    const program = programs.get(request.run);
    if (!program) return { ok: false, error: `no program was built with id ${request.run}`, kind: 'failure' };
    const buffers = {};
    for (const [k, v] of Object.entries(request.buffers)) buffers[Number(k)] = v;
    let out;
    tf.tidy(() => { out = program.run(buffers); });
    return { ok: true, buffers: out };
  }
  return { ok: false, error: 'this server offers build and run only' };
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    reply({ id: null, ok: false, error: 'not a request', kind: 'failure' });
    continue;
  }
  let body;
  try {
    body = answer(request);
  } catch (problem) {
    body = { ok: false, error: `${problem?.name ?? 'Error'}: ${problem?.message ?? problem}` };
    if (problem instanceof IndexOutOfRange) body.kind = 'index';
  }
  if (!described) {
    described = true;
    Object.assign(body, { name: NAME, version: VERSION, capabilities: CAPABILITIES, functions: ['build'] });
  }
  reply({ id: request.id, ...body });
}
