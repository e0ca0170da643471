// The IR's structure, checked before TensorFlow.js runs anything: names, dtypes, shapes,
// scopes, buffers, ranges, functions and calls (ir.md). This is the part of the IR a system
// has no opinion on, which the Python adapters have the reference check (adapters/eager.py);
// gradient acceptance is left to TensorFlow.js. `gradient y x` is typed as x.
// check(root) takes the program's blocks, and throws an IRError naming the line.

export class IRError extends Error {
  get name() { return 'IRError'; }
}

const F32_OR_I32 = ['f32', 'i32'];
const ELEMENTWISE = {
  add: [F32_OR_I32, null], mul: [F32_OR_I32, null], max: [F32_OR_I32, null],
  idiv: [['i32'], null], mod: [['i32'], null], shl: [['i32'], null], shr: [['i32'], null],
  and: [['i32', 'bool'], null], or: [['i32', 'bool'], null], xor: [['i32', 'bool'], null],
  cmplt: [F32_OR_I32, 'bool'], cmpne: [['f32', 'i32', 'bool'], 'bool'],
  recip: [['f32'], null], exp2: [['f32'], null], log2: [['f32'], null], sqrt: [['f32'], null],
  sin: [['f32'], null], detach: [['f32', 'i32', 'bool'], null],
};
const UNARY = new Set(['recip', 'exp2', 'log2', 'sqrt', 'sin', 'detach']);
const IN_FUNCTIONS = new Set([...Object.keys(ELEMENTWISE), 'where', 'cast', 'bitcast', 'reduce',
  'expand', 'reshape', 'call', 'return']);
const size = (shape) => shape.reduce((a, b) => a * b, 1);
const same = (a, b) => a.length === b.length && a.every((d, k) => d === b[k]);

function fail(s, message) { throw new IRError(`line ${s.line}: ${message}`); }

function shapeAttr(s, key) {
  const v = s.attrs[key];
  const shape = Array.isArray(v) ? v : typeof v === 'number' ? [v] : null;
  if (!shape || !shape.every((d) => Number.isInteger(d) && d >= 0)) fail(s, `${key}= must be a shape such as [2,3]`);
  return shape;
}

// The result of elementwise operands: equal shapes, except literals, which broadcast.
function elementwise(s, types) {
  const shapes = types.filter((t) => !t.literal).map((t) => t.shape);
  for (const shape of shapes) if (!same(shape, shapes[0])) fail(s, `operand shapes differ: [${shapes[0]}] and [${shape}]`);
  return shapes.length ? shapes[0] : [];
}

function typeOf(s, types) {
  const { op, attrs } = s;
  const arity = (n) => { if (types.length !== n) fail(s, `${op} takes ${n} operands, got ${types.length}`); };
  for (const t of types) if (t.kind !== 'value') fail(s, `a ${t.kind} is no operand of ${op}`);
  if (ELEMENTWISE[op]) {
    const [dtypes, result] = ELEMENTWISE[op];
    arity(UNARY.has(op) ? 1 : 2);
    if (!dtypes.includes(types[0].dtype) || types.some((t) => t.dtype !== types[0].dtype)) {
      fail(s, `${op} takes ${dtypes.join(' or ')} operands of one dtype, got ${types.map((t) => t.dtype).join(', ')}`);
    }
    return { dtype: result ?? types[0].dtype, shape: elementwise(s, types) };
  }
  switch (op) {
    case 'where':
      arity(3);
      if (types[0].dtype !== 'bool' || types[1].dtype !== types[2].dtype) fail(s, 'where takes a bool and two operands of one dtype');
      return { dtype: types[1].dtype, shape: elementwise(s, types) };
    case 'cast':
    case 'bitcast': {
      arity(1);
      const allowed = op === 'cast' ? ['f32', 'i32', 'bool'] : F32_OR_I32;
      if (!allowed.includes(attrs.dtype) || !allowed.includes(types[0].dtype)) fail(s, `${op} between ${allowed.join(', ')} only`);
      return { dtype: attrs.dtype, shape: types[0].shape };
    }
    case 'reduce': {
      arity(1);
      if (!F32_OR_I32.includes(types[0].dtype) || !['add', 'max', 'mul'].includes(attrs.op)) fail(s, 'reduce takes f32 or i32 and op=add, max or mul');
      const rank = types[0].shape.length;
      if (attrs.axis === undefined) return { dtype: types[0].dtype, shape: [] };
      const axes = Array.isArray(attrs.axis) ? attrs.axis : [attrs.axis];
      axes.forEach((a, k) => {
        if (!Number.isInteger(a) || a < 0 || a >= rank || (k && a <= axes[k - 1])) fail(s, `axis= must be increasing axes of a rank-${rank} value`);
      });
      return { dtype: types[0].dtype, shape: types[0].shape.map((d, k) => (axes.includes(k) ? 1 : d)) };
    }
    case 'expand': {
      arity(1);
      const shape = shapeAttr(s, 'shape');
      const from = types[0].shape;
      if (from.length && (from.length !== shape.length || from.some((d, k) => d !== shape[k] && d !== 1))) fail(s, `cannot expand [${from}] to [${shape}]`);
      return { dtype: types[0].dtype, shape };
    }
    case 'reshape': {
      arity(1);
      const shape = shapeAttr(s, 'shape');
      if (size(shape) !== size(types[0].shape)) fail(s, `cannot reshape [${types[0].shape}] to [${shape}]`);
      return { dtype: types[0].dtype, shape };
    }
    case 'gradient':
      arity(2);
      return { dtype: types[1].dtype, shape: types[1].shape };
    default:
      return fail(s, `unknown op ${op}`);
  }
}

export function check(root) {
  const functions = new Map();
  const slots = new Set();
  const calling = [];
  let defined = new Set();

  const literalType = (o) => ({ kind: 'value', dtype: o.kind, shape: [], literal: true });

  function define(s, name) {
    if (!name || !/^%[A-Za-z_][A-Za-z0-9_.]*$/.test(name)) fail(s, `${name ?? 'a statement'} needs a %name`);
    if (defined.has(name)) fail(s, `${name} is defined twice`);
    defined.add(name);
  }

  // A function body is checked at each call, with the arguments' types and names of its own.
  function callBody(s, name, args) {
    const f = functions.get(name);
    if (!f) fail(s, `${name} is not defined before this call`);
    if (calling.includes(name)) fail(s, `${name} calls itself`);
    if (args.length !== f.params.length) fail(s, `${name} takes ${f.params.length} arguments`);
    if (args.some((a) => a.kind !== 'value')) fail(s, 'a call takes values');
    const saved = defined;
    defined = new Set(f.params);
    calling.push(name);
    try {
      const env = new Map(f.params.map((p, k) => [p, { ...args[k], literal: false }]));
      const returned = block(f.body, env, { inFunction: true });
      if (!returned) fail(s, `${name} returns nothing`);
      return { dtype: returned.dtype, shape: returned.shape };
    } catch (problem) {
      if (problem instanceof IRError && !problem.message.includes('in the call of')) {
        fail(s, `in the call of ${name}: ${problem.message}`);
      }
      throw problem;
    } finally {
      calling.pop();
      defined = saved;
    }
  }

  // Check a block's statements and nested blocks in an environment; a function body's
  // returned type.
  function block(body, env, { inFunction = false, inRange = false } = {}) {
    const operand = (s, o) => {
      if (o.kind !== 'name') return literalType(o);
      if (!env.has(o.text)) fail(s, `${o.text} is not defined here`);
      return env.get(o.text);
    };
    let returned = null;
    for (const s of body) {
      if (s.head) {
        const h = s.head;
        if (h.op === 'def') {
          if (inFunction || inRange) fail(h, 'a def only at top level');
          const name = h.operands[0]?.text;
          if (!name?.startsWith('@')) fail(h, 'def needs a @name');
          if (functions.has(name)) fail(h, `${name} is defined twice`);
          if (s.closedBy !== name) fail(h, `${name} needs end ${name}`);
          for (const b of s.body) {
            if (b.head) fail(b.head, `a function body holds no ${b.head.op}`);
            if (!IN_FUNCTIONS.has(b.op)) fail(b, `a function body holds no ${b.op}`);
          }
          functions.set(name, { params: h.operands.slice(1).map((p) => p.text), body: s.body });
          continue;
        }
        if (inFunction) fail(h, 'a function body holds no range');
        const count = h.operands[0];
        if (h.operands.length !== 1 || count.kind !== 'i32' || count.value < 0) fail(h, 'range takes a count, an i32 literal >= 0');
        if (!h.target || s.closedBy !== h.target) fail(h, `range ${h.target} needs end ${h.target}`);
        define(h, h.target);
        const inner = new Map(env);
        inner.set(h.target, { kind: 'value', dtype: 'i32', shape: [], literal: false });
        block(s.body, inner, { inRange: true });
        continue;
      }
      if (inFunction && !IN_FUNCTIONS.has(s.op)) fail(s, `a function body holds no ${s.op}`);
      if (s.op === 'return') {
        if (!inFunction) fail(s, 'return outside a def');
        returned = operand(s, s.operands[0]);
        continue;
      }
      if (s.op === 'buffer') {
        if (inRange) fail(s, 'a buffer only at top level');
        if (slots.has(s.attrs.slot)) fail(s, `slot ${s.attrs.slot} is declared twice`);
        if (!['f32', 'i32', 'bool'].includes(s.attrs.dtype) || !Number.isInteger(s.attrs.slot)) fail(s, 'a buffer needs slot=, dtype= and shape=');
        slots.add(s.attrs.slot);
        define(s, s.target);
        env.set(s.target, { kind: 'buffer', dtype: s.attrs.dtype, shape: shapeAttr(s, 'shape') });
        continue;
      }
      const types = s.operands.map((o) => (o.kind === 'name' && o.text.startsWith('@') ? { kind: 'func' } : operand(s, o)));
      if (s.op === 'load' || s.op === 'store') {
        const buffer = types[0];
        if (!buffer || buffer.kind !== 'buffer') fail(s, `${s.op} needs a buffer first`);
        const indexed = types.length === (s.op === 'load' ? 2 : 3);
        if (types.length !== (s.op === 'load' ? 1 : 2) + indexed) fail(s, `${s.op} takes a buffer${s.op === 'store' ? ', a value' : ''} and an optional index`);
        if (indexed) {
          const index = types[types.length - 1];
          if (index.kind !== 'value' || index.dtype !== 'i32' || index.shape.length) fail(s, 'an index is an i32 scalar');
        }
        if (s.op === 'store') {
          const v = types[1];
          const shape = indexed ? [] : buffer.shape;
          if (v.kind !== 'value' || v.dtype !== buffer.dtype || !(same(v.shape, shape) || v.literal)) fail(s, `store takes a ${buffer.dtype}[${shape}] value`);
          if (s.target) fail(s, 'store names nothing');
          continue;
        }
        define(s, s.target);
        env.set(s.target, { kind: 'value', dtype: buffer.dtype, shape: indexed ? [] : buffer.shape, literal: false });
        continue;
      }
      if (!s.target) fail(s, `${s.op} needs a name: %x = ${s.op} ...`);
      const type = s.op === 'call' ? callBody(s, s.operands[0]?.text, types.slice(1)) : typeOf(s, types);
      define(s, s.target);
      env.set(s.target, { kind: 'value', ...type, literal: false });
    }
    return returned;
  }

  block(root.body, new Map());
}
