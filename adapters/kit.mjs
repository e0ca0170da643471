// The adapter kit for Node: a JavaScript system as an implementation of the IR, served over the
// suite's JSON-lines protocol with the program as JSON (SPEC.md, "The protocol" and
// "Adapters"; adapters/tfjs/server.mjs is written on it). The twin of adapters/kit.py: the
// suite's reference parses and structure-checks the program and sends it as JSON
// (reference/jsonform.py), so no IR reader is needed here; the kit runs it eagerly,
// statement by statement, with the system's values, and every number and every derivative
// is the system's own.
//
//   serve({
//     name, version, capabilities,              // as CAPABILITIES (SPEC.md, "The protocol")
//     fromBits(dtype, shape, bits),             // a value of 'f32' | 'i32' | 'bool' from its
//                                               // raw 32-bit patterns (a Uint32Array)
//     toBits(value, dtype, shape),              // and back: an array of unsigned patterns
//     ops: { add: (operands, info) => ..., },   // one per IR op; info: {attrs, dtype, shape}
//     element(a, index, info),                  // a load with an index (flattened)
//     withElement(a, index, e, info),           // a store with one, out of place
//     broadcast(e, info),                       // a store without: e spread to info.shape
//     gradFunction(f, x),                       // the derivative of f at x: f maps a new x
//                                               // to y, which may be a value not tracked
//     around(run),                              // optional: run inside it (tf.tidy)
//   });
//
// A gradient recomputes y from a new x along the record of how each value was made, so a
// system that differentiates functions (tf.grad) nests as gradients nest. `build` runs the
// program once on zeros: what the system refuses there is its rejection, and a program the
// reference's structure check refuses is rejected with the reference's words.
import { createInterface } from 'node:readline';

export class IndexOutOfRange extends Error {}

const size = (shape) => shape.reduce((a, b) => a * b, 1);
const KEPT = 64; // the programs of the latest builds kept for their runs

// A value as the kit holds it: the system's, and the op, operands and info that made it.
class Value {
  constructor(value, op = null, operands = [], info = null) {
    this.value = value; this.op = op; this.operands = operands; this.info = info;
  }
}

class Program {
  constructor(system, json) {
    this.system = system;
    this.buffers = json.buffers;
    this.functions = new Map(json.functions.map((f) => [f.name, f]));
    this.body = json.body;
  }

  run(bits) {
    const s = this.system;
    const memory = new Map(this.buffers.map((b) => [b.name, new Value(s.fromBits(
      b.dtype, b.shape, Uint32Array.from(bits[b.slot] ?? new Array(size(b.shape)).fill(0))))]));
    this.block(this.body, new Map(), memory);
    const out = {};
    for (const b of this.buffers) {
      out[b.slot] = { dtype: b.dtype, shape: b.shape,
        bits: Array.from(s.toBits(memory.get(b.name).value, b.dtype, b.shape), (x) => x >>> 0) };
    }
    return out;
  }

  // Runs a block's statements in env (name:line -> Value); a function body's return value.
  block(statements, env, memory) {
    for (const st of statements) {
      const operands = st.operands;
      if (st.op === 'range') {
        for (let i = 0; i < st.count; i++) {
          const counter = new Value(this.system.fromBits('i32', [], Uint32Array.of(i)));
          counter.counter = i;
          env.set(`${st.target}:${st.line}`, counter);
          this.block(st.body, env, memory);
        }
        continue;
      }
      if (st.op === 'return') return this.value(operands[0], env);
      if (st.op === 'store') {
        const buffer = this.buffer(operands[0]);
        const e = this.value(operands[1], env);
        const info = { attrs: {}, dtype: buffer.dtype, shape: buffer.shape };
        memory.set(buffer.name, operands.length === 3
          ? this.make('withElement', [memory.get(buffer.name), e],
            { ...info, index: this.index(operands[2], env, buffer) })
          : this.make('broadcast', [e], info));
        continue;
      }
      const info = { attrs: st.attrs, dtype: st.dtype, shape: st.shape };
      let value;
      if (st.op === 'load') {
        const buffer = this.buffer(operands[0]);
        value = operands.length === 1 ? memory.get(buffer.name)
          : this.make('element', [memory.get(buffer.name)],
            { ...info, index: this.index(operands[1], env, buffer) });
      } else if (st.op === 'call') {
        const f = this.functions.get(operands[0].function);
        const inner = new Map(f.params.map((p, k) => [`${p}:${f.line}`, this.value(operands[k + 1], env)]));
        value = this.block(f.body, inner, memory);
      } else if (st.op === 'gradient') {
        // A buffer named as the loss or x is its contents, as code written for the system
        // would pass them: what the system makes of that is its own answer.
        const [y, x] = operands.map((o) => ('buffer' in o
          ? memory.get(this.buffer(o).name) : this.value(o, env)));
        value = new Value(this.grad(y, x, x.value), 'gradient', [x], { y, x });
      } else {
        value = this.make(st.op, operands.map((o) => this.value(o, env)), info);
      }
      env.set(`${st.target}:${st.line}`, value);
    }
    return null;
  }

  buffer(operand) {
    return this.buffers.find((b) => b.name === operand.buffer);
  }

  value(operand, env) {
    if ('name' in operand) return env.get(`${operand.name}:${operand.line}`);
    return new Value(this.system.fromBits(operand.dtype, [], Uint32Array.of(operand.literal)));
  }

  // A load's or store's index as a number: a literal's or a counter's as it is, the system
  // asked only for one it computed.
  index(operand, env, buffer) {
    let i;
    if ('literal' in operand) i = operand.literal | 0;
    else {
      const v = this.value(operand, env);
      i = v.counter ?? (this.system.toBits(v.value, 'i32', [])[0] | 0);
    }
    if (!(i >= 0 && i < size(buffer.shape))) {
      throw new IndexOutOfRange(`index ${i} out of range for ${buffer.name} of ${size(buffer.shape)} elements`);
    }
    return i;
  }

  make(op, operands, info) {
    return new Value(this.apply(op, operands.map((o) => o.value), info), op, operands, info);
  }

  apply(op, values, info) {
    const s = this.system;
    if (op === 'element') return s.element(values[0], info.index, info);
    if (op === 'withElement') return s.withElement(values[0], info.index, values[1], info);
    if (op === 'broadcast') return s.broadcast(values[0], info);
    if (!s.ops[op]) throw new Error(`${s.name} has no ${op} in its adapter's table`);
    return s.ops[op](values, info);
  }

  // v's value with the values in `bound` (Value -> the system's) replaced, along the record;
  // deepest first, on an explicit stack.
  recompute(v, bound) {
    const memo = new Map(bound);
    const stack = [v];
    while (stack.length) {
      const top = stack[stack.length - 1];
      if (memo.has(top)) { stack.pop(); continue; }
      if (top.op === null) { memo.set(top, top.value); stack.pop(); continue; }
      const pending = top.operands.filter((o) => !memo.has(o));
      if (pending.length) { stack.push(...pending); continue; }
      stack.pop();
      const values = top.operands.map((o) => memo.get(o));
      memo.set(top, top.op === 'gradient' ? this.grad(top.info.y, top.info.x, values[0], bound)
        : this.apply(top.op, values, top.info));
    }
    return memo.get(v);
  }

  // The derivative of y as a function of x, at xValue; an outer gradient's variables stay bound.
  grad(y, x, xValue, outer = new Map()) {
    return this.system.gradFunction((newX) => {
      const bound = new Map(outer);
      bound.set(x, newX);
      return this.recompute(y, bound);
    }, xValue);
  }
}

function build(system, request) {
  const json = request.program ?? (request.build.trim() === '' ? { buffers: [], functions: [], body: [] } : null);
  if (json === null) throw new Error('this server needs the program as JSON: it said "program": "json" first');
  if (json.error) throw new Error(json.error);
  const program = new Program(system, json);
  try {
    (system.around ?? ((run) => run()))(() => { program.run({}); });
  } catch (problem) {
    if (!(problem instanceof IndexOutOfRange)) throw problem;
  }
  return program;
}

export async function serve(system) {
  // What the system prints must not look like replies: replies go to the real stdout only.
  const reply = (object) => process.stdout.write(JSON.stringify(object) + '\n');
  console.log = console.warn = console.info = (...args) => process.stderr.write(args.join(' ') + '\n');
  const programs = new Map();
  let described = false;
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
      if ('build' in request) {
        programs.set(request.id, build(system, request));
        for (const old of [...programs.keys()].slice(0, -KEPT)) programs.delete(old);
        body = { ok: true };
      } else if ('run' in request) {
        const program = programs.get(request.run);
        if (!program) throw Object.assign(new Error(`no program was built with id ${request.run}`), { kind: 'failure' });
        const bits = Object.fromEntries(Object.entries(request.buffers).map(([k, v]) => [k, v.bits]));
        (system.around ?? ((run) => run()))(() => { body = { ok: true, buffers: program.run(bits) }; });
      } else body = { ok: false, error: 'this server offers build and run only' };
    } catch (problem) {
      body = { ok: false, error: `${problem?.name ?? 'Error'}: ${problem?.message ?? problem}` };
      if (problem instanceof IndexOutOfRange) body.kind = 'index';
      if (problem?.kind === 'failure') body.kind = 'failure';
    }
    if (!described) {
      described = true;
      Object.assign(body, { name: system.name, version: system.version,
        capabilities: system.capabilities, functions: ['build'], program: 'json' });
    }
    reply({ id: request.id, ...body });
  }
}
