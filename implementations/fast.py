"""An independent, fast implementation of the IR and its gradient, in numpy float32.

Written apart from the reference (reference/): its own parser, its own graph, its own walk,
and whole-array numpy arithmetic instead of MPFR element by element. add, mul, recip and sqrt
are IEEE operations in numpy, so correctly rounded; exp2, log2 and sin are computed in float64
and rounded to float32, which is within 1 ulp (declared below). It follows SPEC.md, decisions
included, and the conformance suite holds it to that.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

NAME = "fast"
VERSION = "0.1.0"
CAPABILITIES = {"unsupported": [], "ulp": {"exp2": 1, "log2": 1, "sin": 1},
                "bit_exact_gradients": True}

NP = {"f32": np.float32, "i32": np.int32, "bool": np.bool_}
LN2 = np.float32(0.6931472)
HALF_PI = np.float32(1.5707964)


class Invalid(Exception):
    """The program is rejected at build."""


class IndexOutOfRange(Exception):
    pass


# --- literals -------------------------------------------------------------------------------


def f32_literal(text: str) -> np.float32:
    """The decimal rounded once to the nearest float32 (ties to even): a float64 guess, then
    the neighbour that is exactly nearest."""
    if text in ("inf", "-inf", "nan"):
        return np.float32(text)
    negative = text.startswith("-")
    mantissa, _, exponent = text.lstrip("-").lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return np.float32(-0.0 if negative else 0.0)
    # Far outside f32, skip the exact arithmetic: by the decimal exponent of the leading
    # digit, or by an exponent too long for int() to read (no mantissa makes up for it).
    if len(exponent.lstrip("+-").lstrip("0")) > 12:
        far = 99 if not exponent.startswith("-") else -99
    else:
        far = len(whole.lstrip("0")) - 1 if whole.strip("0") else \
            -(len(fraction) - len(fraction.lstrip("0")) + 1)
        far += int(exponent or "0")
    if far > 40 or far < -47:
        if far < 0:
            return np.float32(-0.0 if negative else 0.0)
        return np.float32(-np.inf if negative else np.inf)
    exact = Fraction(Decimal(text))  # Decimal reads any number of digits; int() does not
    with np.errstate(over="ignore"):
        guess = np.float32(float(text)) if abs(exact) < 10**40 else np.float32(
            math.copysign(math.inf, exact))
    if exact == 0:
        return np.float32(-0.0) if text.startswith("-") else np.float32(0.0)
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess,
                  np.nextafter(guess, np.float32(np.inf))]
    best = None
    for c in candidates:
        if np.isinf(c):
            # overflow: inf is nearest from 2**128 - 2**103 on (the tie goes to inf)
            if abs(exact) >= 2**128 - 2**103 and (c > 0) == (exact > 0):
                return c
            continue
        distance = abs(Fraction(float(c)) - exact)
        even = int(np.array([c], np.float32).view(np.uint32)[0]) % 2 == 0
        key = (distance, not even)
        if best is None or key < best[0]:
            best = (key, c)
    assert best is not None  # the finite candidates: at least the guess itself
    value = best[1]
    if value == 0 and exact < 0:
        return np.float32(-0.0)
    return value


def literal(text: str):
    if text in ("true", "false"):
        return "bool", np.bool_(text == "true")
    if re.fullmatch(r"-?\d+", text):
        value = int(text)
        if not -(2**31) <= value < 2**31:
            raise Invalid(f"i32 literal {text} out of range")
        return "i32", np.int32(value)
    if re.fullmatch(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|-?inf|nan", text):
        return "f32", f32_literal(text)
    raise Invalid(f"bad operand {text}")


# --- the graph --------------------------------------------------------------------------------


class Node:
    __slots__ = ("args", "at", "dt", "id", "op", "scope", "sh", "tag", "value")

    def __init__(self, id_, op, dt, sh, args, at, scope, tag, value=None):
        self.id, self.op, self.dt, self.sh, self.args = id_, op, dt, sh, args
        self.at, self.scope, self.tag, self.value = at, scope, tag, value

    @property
    def literal(self) -> bool:
        return self.op == "lit"


ELEMENTWISE = {"add": ("f32", "i32"), "mul": ("f32", "i32"), "max": ("f32", "i32"),
               "idiv": ("i32",), "mod": ("i32",), "and": ("i32", "bool"), "or": ("i32", "bool"),
               "xor": ("i32", "bool"), "shl": ("i32",), "shr": ("i32",),
               "cmplt": ("f32", "i32"), "cmpne": ("f32", "i32", "bool")}
UNARY = ("recip", "exp2", "log2", "sqrt", "sin")
# The other ops a function body may hold, and what a body ends with.
BODY_OPS = ("where", "cast", "bitcast", "reduce", "expand", "reshape", "detach", "call",
            "return", "gradient", "buffer", "load", "store", "range", "end", "def")


class Graph:
    def __init__(self):
        self.nodes, self.index = [], {}

    def scope_of(self, op, args, scope):
        """A load, a counter, a buffer, a parameter: where made; any other node: the innermost
        of its operands' scopes (loop ids grow inwards), so that a pure node of outside values
        is the one outside (ir.md, "Hash consing")."""
        if op in ("load", "counter", "buffer", "param"):
            return scope
        return max((a.scope for a in args), default=0)

    def make(self, op, args=(), at=(), scope=0, tag=None, dt=None, sh=None, value=None):
        at = tuple(sorted(at))
        scope = self.scope_of(op, args, scope)
        if dt is None:
            dt, sh = self.type_of(op, args, dict(at))
        key = (op, dt, sh, tuple(a.id for a in args), at, scope, tag,
               None if value is None else (value.dtype.str, value.tobytes()))
        node = self.index.get(key)
        if node is None:
            node = Node(len(self.nodes), op, dt, sh, tuple(args), at, scope, tag, value)
            self.nodes.append(node)
            self.index[key] = node
        return node

    def lit(self, dt, value, scope=0):
        return self.make("lit", (), (), scope, None, dt, (), np.array(value, NP[dt]))

    @staticmethod
    # Complex on purpose: the independent implementation types every op in one place, as
    # ir.md's table does, so that it shares no structure with the reference.
    def type_of(op, args, at):  # noqa: C901
        if any(a.op == "buffer" for a in args) and op != "load":
            raise Invalid(f"a buffer as an operand of {op}")
        if op in ELEMENTWISE or op in UNARY or op == "where":
            shapes = {a.sh for a in args if not a.literal}
            if len(shapes) > 1:
                raise Invalid(f"shapes differ in {op}")
            sh = shapes.pop() if shapes else ()
            if op == "where":
                c, a, b = args
                if c.dt != "bool" or a.dt != b.dt:
                    raise Invalid("where types")
                return a.dt, sh
            kinds = ELEMENTWISE.get(op, ("f32",))
            if len(args) != (1 if op in UNARY else 2) or len({a.dt for a in args}) != 1 \
                    or args[0].dt not in kinds:
                raise Invalid(f"{op} operand types")
            return ("bool" if op.startswith("cmp") else args[0].dt), sh
        if len(args) != 1 and op != "load":
            raise Invalid(f"{op} takes one operand")
        a = args[0]
        if op == "cast":
            if at.get("dtype") not in NP:
                raise Invalid("cast dtype")
            return at["dtype"], a.sh
        if op == "bitcast":
            if at.get("dtype") not in ("f32", "i32") or a.dt not in ("f32", "i32"):
                raise Invalid("bitcast types")
            return at["dtype"], a.sh
        if op == "detach":
            return a.dt, a.sh
        if op == "reduce":
            if a.dt not in ("f32", "i32") or at.get("op") not in ("add", "max", "mul"):
                raise Invalid("reduce")
            axis = at.get("axis")
            if axis is None:
                return a.dt, ()
            if list(axis) != sorted(set(axis)) or any(not 0 <= k < len(a.sh) for k in axis):
                raise Invalid("reduce axis")
            return a.dt, tuple(1 if k in axis else d for k, d in enumerate(a.sh))
        if op == "expand":
            sh = at.get("shape")
            if sh is None or (a.sh and (len(a.sh) != len(sh) or any(
                    d not in (1, s) for d, s in zip(a.sh, sh, strict=True)))):
                raise Invalid("expand shape")
            return a.dt, sh
        if op == "reshape":
            sh = at.get("shape")
            if sh is None or math.prod(sh) != math.prod(a.sh):
                raise Invalid("reshape shape")
            return a.dt, sh
        if op == "load":
            buf = args[0]
            if buf.op != "buffer" or len(args) > 2:
                raise Invalid("load")
            if len(args) == 2:
                if args[1].dt != "i32" or args[1].sh != ():
                    raise Invalid("index")
                return buf.dt, ()
            return buf.dt, buf.sh
        raise Invalid(f"unknown op {op}")


# --- building ---------------------------------------------------------------------------------

_TOKENS = re.compile(r"[a-z_]+=\s*\[[^\]]*\]|\S+")


def _attr(text):
    text = text.strip()
    if text.startswith("["):
        inner = text[1:-1].strip()
        return tuple(int(v) for v in inner.split(",")) if inner else ()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def tokenize(source, where=None):
    """The statements, each (line, target, op, operands, attributes); `where[0]`, the line
    being read."""
    out = []
    where = where if where is not None else [0]
    for number, raw in enumerate(source.splitlines(), 1):
        where[0] = number
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        target = None
        m = re.match(r"(%[A-Za-z_][A-Za-z0-9_.]*)\s*=\s*([a-z][a-z0-9_]*(\s.*)?)$", line)
        if m:
            target, line = m.group(1), m.group(2)
        words = _TOKENS.findall(line)
        if not words or not re.fullmatch(r"[a-z][a-z0-9_]*", words[0]):
            raise Invalid(f"line {number}: no op")
        operands, attrs = [], {}
        for w in words[1:]:
            if re.fullmatch(r"[a-z_]+=.*", w):
                k, v = w.split("=", 1)
                if k in attrs:
                    raise Invalid("attribute twice")
                attrs[k] = _attr(v)
            elif attrs:
                raise Invalid("operand after attribute")
            else:
                operands.append(w)
        out.append((number, target, words[0], operands, attrs))
    return out


class Store:
    __slots__ = ("buf", "idx", "val")

    def __init__(self, buf, val, idx):
        self.buf, self.val, self.idx = buf, val, idx


class Loop:
    __slots__ = ("body", "count", "counter")

    def __init__(self, counter, count):
        self.counter, self.count, self.body = counter, count, []


class Program:
    def __init__(self):
        self.g = Graph()
        self.top = []  # ("def", node) | Store | Loop
        self.buffers = {}  # slot -> node
        self.functions = {}  # name -> (params, body lines)


# Complex on purpose: the independent implementation's whole builder in one pass, deliberately
# unlike the reference's, so that a shared mistake of structure is unlikely.
def build_program(source: str) -> Program:
    """The program built, or Invalid naming the line it is rejected at (ir.md: every error
    in the text with its line number)."""
    where = [0]
    try:
        return _build_program(source, where)
    except Invalid as problem:
        if not where[0] or str(problem).startswith("line "):
            raise
        raise Invalid(f"line {where[0]}: {problem}") from None


def _build_program(source: str, where: list) -> Program:  # noqa: C901
    p = Program()
    lines = tokenize(source, where)
    env: dict = {}
    ever: set = set()
    stack: list[tuple] = [(p.top, None, [])]  # (body, loop, names)
    stores: dict = {}
    ranges_of: dict = {}  # node id -> set of loop ids it depends on
    next_loop = [0]

    def scope():
        return stack[-1][1].counter.tag if stack[-1][1] else 0

    def operand(text):
        if text.startswith("%"):
            if text not in env:
                raise Invalid(f"undefined {text}")
            return env[text]
        if text.startswith("@"):
            raise Invalid("function as operand")
        dt, v = literal(text)
        return p.g.lit(dt, v, scope())

    def bind(name, node):
        if name in ever:
            raise Invalid(f"{name} redefined")
        ever.add(name)
        env[name] = node
        stack[-1][2].append(name)

    def deps(node):
        if node.id in ranges_of:
            return ranges_of[node.id]
        todo, seen = [node], []
        while todo:
            n = todo.pop()
            if n.id in ranges_of:
                continue
            missing = [a for a in n.args if a.id not in ranges_of]
            if missing:
                todo.append(n)
                todo.extend(missing)
                continue
            ranges_of[n.id] = set().union(*(ranges_of[a.id] for a in n.args))
            seen.append(n)
        return ranges_of[node.id]

    i = 0
    while i < len(lines):
        number, target, op, ops, at = lines[i]
        where[0] = number
        i += 1
        if op == "def":
            if len(stack) > 1 or target or not ops or not ops[0].startswith("@"):
                raise Invalid("def")
            name, params = ops[0], ops[1:]
            body = []
            while True:
                if i >= len(lines):
                    raise Invalid("def never closed")
                line = lines[i]
                i += 1
                if line[2] == "end" and line[3] == [name]:
                    break
                body.append(line)
            if not body or body[-1][2] != "return" or any(b[2] == "return" for b in body[:-1]):
                raise Invalid("function body must end in return")
            seen = set(params)
            for b in body:
                where[0] = b[0]  # a body's own line, not its def's
                # What the text alone decides, called or not (ir.md: every error in the
                # text, with its line): names defined before use, ops the IR has.
                if any(o.startswith("%") and o not in seen for o in b[3]):
                    raise Invalid(f"a name not defined in {name}")
                if b[2] not in BODY_OPS and b[2] not in ELEMENTWISE and b[2] not in UNARY:
                    raise Invalid(f"unknown op {b[2]}")
                if b[1]:
                    seen.add(b[1])
                if b[2] == "gradient":
                    raise Invalid("gradient in function")
                if b[2] in ("buffer", "load", "store", "range", "end", "def"):
                    raise Invalid("function body op")
                if b[2] == "call" and (not b[3] or b[3][0] not in p.functions):
                    raise Invalid("call of an undefined function")
            if name in p.functions:
                raise Invalid("function twice")
            p.functions[name] = (params, body)
            continue
        if (op in ("store", "end", "return") and target) or \
                (op not in ("store", "end", "return") and not target):
            raise Invalid(f"line {number}: target")
        if op == "buffer":
            if len(stack) > 1 or ops or set(at) - {"slot", "dtype", "shape"}:
                raise Invalid("buffer")
            slot, dt = at.get("slot"), at.get("dtype")
            sh = at.get("shape", ())
            sh = (sh,) if isinstance(sh, int) else sh
            if not isinstance(slot, int) or slot < 0 or slot in p.buffers or dt not in NP \
                    or any(d < 0 for d in sh) or math.prod(sh) > 1 << 24:
                raise Invalid("buffer attributes")
            node = p.g.make("buffer", (), (("slot", slot),), 0, None, dt, tuple(sh))
            p.buffers[slot] = node
            ranges_of[node.id] = set()
            bind(target, node)
            stack[-1][0].append(("def", node))
        elif op == "store":
            if at or len(ops) not in (2, 3):
                raise Invalid("store")
            buf, val = operand(ops[0]), operand(ops[1])
            idx = operand(ops[2]) if len(ops) == 3 else None
            if buf.op != "buffer" or val.op == "buffer" or val.dt != buf.dt:
                raise Invalid("store types")
            if idx is not None and (idx.op == "buffer" or idx.dt != "i32" or idx.sh != ()
                                    or val.sh != ()):
                raise Invalid("store index")
            if idx is None and not val.literal and val.sh != buf.sh:
                raise Invalid("store shape")
            stores[buf.id] = stores.get(buf.id, 0) + 1
            stack[-1][0].append(Store(buf, val, idx))
        elif op == "range":
            if at or len(ops) != 1 or not re.fullmatch(r"\d+", ops[0]) or len(stack) > 64:
                raise Invalid("range")
            next_loop[0] += 1
            loop_id = next_loop[0]
            count = int(ops[0])
            if count >= 2**31:
                raise Invalid("range count")
            counter = p.g.make("counter", (), (), loop_id, loop_id, "i32", ())
            ranges_of[counter.id] = {loop_id}
            loop = Loop(counter, count)
            stack[-1][0].append(loop)
            stack.append((loop.body, loop, []))
            bind(target, counter)
        elif op == "end":
            if len(stack) == 1 or ops != [env_name(env, stack[-1][1].counter)]:
                raise Invalid("end")
            _, _, names = stack.pop()
            for n in names:
                del env[n]
        elif op == "gradient":
            if at or len(ops) != 2:
                raise Invalid("gradient")
            y, x = operand(ops[0]), operand(ops[1])
            open_loops = {f[1].counter.tag for f in stack if f[1]}
            result = expand_gradient(p, y, x, scope(), open_loops, deps, stores_reaching(p))
            bind(target, result)
            stack[-1][0].append(("def", result))
        elif op == "call":
            node = call(p, p.g, ops, at, operand, scope())
            ranges_of.setdefault(node.id, set().union(*(deps(a) for a in node.args)))
            bind(target, node)
            stack[-1][0].append(("def", node))
        elif op == "return":
            raise Invalid("return outside a function")
        else:
            args = tuple(operand(o) for o in ops)
            at = dict(at)
            if isinstance(at.get("axis"), int):
                at["axis"] = (at["axis"],)
            if isinstance(at.get("shape"), int):
                at["shape"] = (at["shape"],)
            allowed = {"cast": {"dtype"}, "bitcast": {"dtype"}, "reduce": {"op", "axis"},
                       "expand": {"shape"}, "reshape": {"shape"}}.get(op, set())
            if set(at) - allowed:
                raise Invalid("attribute")
            if "shape" in at and (any(d < 0 for d in at["shape"])
                                  or math.prod(at["shape"]) > 1 << 24):
                raise Invalid("shape")
            tag = None
            if op == "load" and args and args[0].op == "buffer":
                tag = stores.get(args[0].id, 0)
            node = p.g.make(op, args, at.items(), scope(), tag)
            if node.id not in ranges_of:
                own = {f[1].counter.tag for f in stack if f[1]} if op == "load" else set()
                ranges_of[node.id] = own.union(*(deps(a) for a in args))
            bind(target, node)
            stack[-1][0].append(("def", node))
    if len(stack) > 1:
        raise Invalid("range never closed")
    return p


def env_name(env, node):
    for name, n in env.items():
        if n is node:
            return name
    return None


def call(p, g, ops, at, operand, scope):
    if at or not ops or ops[0] not in p.functions:
        raise Invalid("call")
    params, body = p.functions[ops[0]]
    args = tuple(operand(o) for o in ops[1:])
    if len(args) != len(params) or any(a.op == "buffer" for a in args):
        raise Invalid("call arguments")
    fg = Graph()
    fenv = {name: fg.make("param", (), (("index", k),), 0, None, a.dt, a.sh)
            for k, (name, a) in enumerate(zip(params, args, strict=True))}
    order = []

    def foperand(text):
        if text.startswith("%"):
            if text not in fenv:
                raise Invalid("undefined in function")
            return fenv[text]
        if text.startswith("@"):
            raise Invalid("function as operand")
        dt, v = literal(text)
        return fg.lit(dt, v)

    result = None
    for _, target, op, fops, fat in body:
        if op == "return":
            result = foperand(fops[0]) if len(fops) == 1 else None
            if result is None or target:
                raise Invalid("return")
            break
        if not target or target in fenv:
            raise Invalid("function name")
        if op == "call":
            node = call(p, fg, fops, fat, foperand, 0)
        else:
            fat = dict(fat)
            if isinstance(fat.get("axis"), int):
                fat["axis"] = (fat["axis"],)
            node = fg.make(op, tuple(foperand(o) for o in fops), fat.items())
        fenv[target] = node
        order.append(node)
    assert result is not None  # a def body ends with its return (line 372 refused others)
    node = g.make("call", args, (("func", ops[0]),), scope, None, result.dt, result.sh)
    node.value = (fg, [fenv[n] for n in params], result, order)  # the body, for running
    return node


def stores_reaching(p):
    """load node id -> the stored value nodes it may read (SPEC.md, "Buffers and memory")."""
    found: dict = {}

    def flow(body, state):
        for s in body:
            if isinstance(s, tuple):
                node = s[1]
                if node.op == "load":
                    found.setdefault(node.id, set()).update(state.get(node.args[0].id, ()))
            elif isinstance(s, Store):
                key = s.buf.id
                state = dict(state)
                state[key] = frozenset([s]) if s.idx is None else \
                    frozenset(state.get(key, frozenset())) | {s}
            elif s.count > 0:
                entry = state
                while True:
                    out = flow(s.body, entry)
                    merged = {k: frozenset(state.get(k, frozenset())) | out.get(k, frozenset())
                              for k in set(state) | set(out)}
                    if s.count == 1 or merged == entry:
                        break
                    entry = merged
                state = out
        return state

    flow(p.top, {})
    return {k: [s.val for s in v] for k, v in found.items()}


# --- gradient ---------------------------------------------------------------------------------


# Patch points: each is one decision of the spec, named, so that a seeded fault
# (implementations/faults) can change exactly one.
BLOCKING = ("detach", "buffer")  # nodes through which nothing depends on x


def check_loss(y, mk):
    if y.op == "buffer" or y.dt != "f32" or y.sh != ():
        raise Invalid("[loss-not-f32-scalar]")
    return y


def check_x(x):
    if x.op == "buffer" or x.dt != "f32":
        raise Invalid("[x-not-f32]")
    if x.literal:
        raise Invalid("[x-literal]")


def fold(shares, mk):
    """A node's gradient: the left fold of its shares in arrival order."""
    total = shares[0]
    for s in shares[1:]:
        total = mk("add", total, s)
    return total


# Complex on purpose: the walk of gradient.md in one function, written apart from the reference's.
def expand_gradient(p, y, x, scope, open_loops, deps, reaching):  # noqa: C901
    g = p.g

    def f32(v):
        return g.lit("f32", np.float32(v), scope)

    def mk(name, /, *args, **at):
        return g.make(name, args, tuple((k, v) for k, v in at.items() if v is not None), scope)

    y = check_loss(y, mk)
    check_x(x)
    if deps(y) & open_loops or deps(x) & open_loops:
        raise Invalid("[open-range]")

    # Which nodes depend on x: search from x up through users (f32 edges, no detach, memory).
    edges: dict = {}
    todo, seen = [y], {y.id}
    while todo:
        n = todo.pop()
        if n is x or n.dt != "f32" or n.op in BLOCKING:
            continue
        ins = [a for a in n.args if a.dt == "f32" and a.op != "buffer"]
        if n.op == "load":
            ins += [v for v in reaching.get(n.id, []) if v.dt == "f32"]
        for a in ins:
            edges.setdefault(a.id, []).append(n)
            if a.id not in seen:
                seen.add(a.id)
                todo.append(a)
    hot = set()
    if x.id in seen:
        hot, todo = {x.id}, [x]
        while todo:
            for user in edges.get(todo.pop().id, []):
                if user.id not in hot:
                    hot.add(user.id)
                    todo.append(user)

    # Post-order of y, reversed.
    order, visited, stack = [], {y.id}, [(y, 0)]
    while stack:
        n, k = stack.pop()
        if k < len(n.args):
            stack.append((n, k + 1))
            a = n.args[k]
            if a.id not in visited:
                visited.add(a.id)
                stack.append((a, 0))
        else:
            order.append(n)
    shares = {y.id: [f32(1.0)]}
    result = None
    for n in reversed(order):
        got = shares.get(n.id)
        if not got:
            continue
        grad = fold(got, mk)
        if n is x:
            result = grad
            continue
        if n.id in hot and not _has_rule(n):
            raise Invalid(f"[no-rule] {n.op}")
        for k, a in enumerate(n.args):
            if a.id not in hot:
                continue
            share = rule(n, k, grad, mk, f32)
            if share is not None:
                shares.setdefault(a.id, []).append(share)
    if result is None:
        result = mk("expand", f32(0.0), shape=x.sh) if x.sh else f32(0.0)
    return result


def _has_rule(n):
    if n.op == "reduce":
        return dict(n.at)["op"] in ("add", "max")
    return n.op in ("add", "mul", "recip", "max", "where", "exp2", "log2", "sqrt", "sin",
                    "cast", "bitcast", "detach", "expand", "reshape")


def rule(u, k, g, mk, f32):  # noqa: C901 - one branch per row of gradient.md's rules table
    op, a = u.op, u.args
    if op == "add":
        return g
    if op == "mul":
        return mk("mul", g, a[1 - k])
    if op == "recip":
        return mk("mul", g, mk("mul", mk("mul", u, u), f32(-1.0)))
    if op == "max":
        lt = mk("cmplt", a[1], a[0]) if k == 0 else mk("cmplt", a[0], a[1])
        return mk("where", lt, g, mk("where", mk("cmpne", a[0], a[1]), f32(0.0),
                                     mk("mul", g, f32(0.5))))
    if op == "where":
        return None if k == 0 else mk("where", a[0], g, f32(0.0)) if k == 1 else \
            mk("where", a[0], f32(0.0), g)
    if op == "exp2":
        return mk("mul", mk("mul", g, u), f32(LN2))
    if op == "log2":
        return mk("mul", g, mk("recip", mk("mul", a[0], f32(LN2))))
    if op == "sqrt":
        return mk("mul", g, mk("recip", mk("mul", u, f32(2.0))))
    if op == "sin":
        return mk("mul", g, mk("sin", mk("add", a[0], f32(HALF_PI))))
    if op in ("cast", "bitcast"):
        return g
    if op == "detach":
        return None
    at = dict(u.at)
    if op == "reduce" and at["op"] == "add":
        return mk("expand", g, shape=a[0].sh)
    if op == "reduce" and at["op"] == "max":
        sh = a[0].sh
        m = mk("where", mk("cmpne", a[0], mk("expand", u, shape=sh)), f32(0.0), f32(1.0))
        count = mk("expand", mk("reduce", m, op="add", axis=at.get("axis")), shape=sh)
        return mk("mul", mk("mul", m, mk("recip", count)), mk("expand", g, shape=sh))
    if op == "expand":
        if not a[0].sh:
            return mk("reduce", g, op="add")
        return mk("reduce", g, op="add", axis=tuple(d for d, n in enumerate(a[0].sh) if n == 1))
    if op == "reshape":
        return mk("reshape", g, shape=a[0].sh)
    raise Invalid(f"[no-rule] {op}")


# --- running ----------------------------------------------------------------------------------


def _f32_max(a, b):
    out = np.maximum(a, b)  # NaN-propagating
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a), b, a), out).astype(np.float32)


def _div(a, b):
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    q = np.abs(a64) // np.abs(safe) * np.sign(a64) * np.sign(safe)
    r = a64 - q * safe
    q = np.where(b64 == 0, 0, q)
    r = np.where(b64 == 0, 0, r)
    return _wrap(q), _wrap(r)


def _wrap(v):
    return ((np.asarray(v, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def _round64(fn, a):
    with np.errstate(all="ignore"):
        return fn(a.astype(np.float64)).astype(np.float32)


def _to_i32(a):
    with np.errstate(invalid="ignore"):
        t = np.trunc(a.astype(np.float64))
        ok = np.isfinite(t) & (t >= -(2**31)) & (t <= 2**31 - 1)
        return np.where(ok, np.where(ok, t, 0).astype(np.int64), -(2**31)).astype(np.int32)


def _elementwise(op, dt, args):  # noqa: C901 - one branch per elementwise op, as ir.md lists them
    a = args[0]
    b: Any = args[1] if len(args) > 1 else None  # None for a unary op, which never reads it
    with np.errstate(all="ignore"):
        if op == "add":
            return a + b if dt == "f32" else _wrap(a.astype(np.int64) + b)
        if op == "mul":
            return a * b if dt == "f32" else _wrap(a.astype(np.int64) * b)
        if op == "max":
            return _f32_max(a, b) if dt == "f32" else np.maximum(a, b)
        if op == "idiv":
            return _div(a, b)[0]
        if op == "mod":
            return _div(a, b)[1]
        if op in ("and", "or", "xor"):
            return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](a, b)
        if op == "shl":
            return _wrap(a.astype(np.int64) << (b.astype(np.int64) & 31))
        if op == "shr":
            return (a.astype(np.int64) >> (b.astype(np.int64) & 31)).astype(np.int32)
        if op == "cmplt":
            return a < b
        if op == "cmpne":
            return a != b
        if op == "recip":
            return np.float32(1.0) / a
        if op == "sqrt":
            return np.sqrt(a)
        if op == "exp2":
            return _round64(np.exp2, a)
        if op == "log2":
            return _round64(np.log2, a)
        if op == "sin":
            return _round64(np.sin, a)
    raise AssertionError(op)


IDENTITY = {("add", "f32"): 0.0, ("max", "f32"): -np.inf, ("mul", "f32"): 1.0,
            ("add", "i32"): 0, ("max", "i32"): -(2**31), ("mul", "i32"): 1}


def _reduce(node, a):
    at = dict(node.at)
    op, dt = at["op"], node.dt
    axes = at.get("axis")
    axes = tuple(range(a.ndim)) if axes is None else axes
    kept = [k for k in range(a.ndim) if k not in axes]
    rows = np.transpose(a, kept + list(axes)).reshape(
        math.prod(a.shape[k] for k in kept), math.prod(a.shape[k] for k in axes))
    out: np.ndarray
    if rows.shape[1] == 0:
        out = np.full(rows.shape[0], IDENTITY[(op, dt)], NP[dt])
    else:
        out = rows[:, 0].copy()
        for j in range(1, rows.shape[1]):  # a left fold, column by column
            out = _elementwise(op, dt, [out, rows[:, j]]).astype(NP[dt])
    return out.reshape(node.sh)


def evaluate(node, args, env_call):
    op = node.op
    if op == "lit":
        return node.value
    if op in ELEMENTWISE or op in UNARY:
        shape = node.sh
        args = [np.broadcast_to(a, shape) for a in args]
        return np.asarray(_elementwise(op, node.args[0].dt, args)).astype(NP[node.dt])
    if op == "where":
        c, a, b = (np.broadcast_to(v, node.sh) for v in args)
        return np.where(c, a, b).astype(NP[node.dt])
    if op == "cast":
        a, src, dst = args[0], node.args[0].dt, node.dt
        if src == dst:
            return a.copy()
        if dst == "bool":
            return a != 0
        if src == "bool":
            return a.astype(NP[dst])
        if dst == "i32":
            return _to_i32(a)
        return a.astype(np.float32)  # i32 -> f32: numpy rounds to nearest even
    if op == "bitcast":
        return args[0].copy().view(NP[node.dt])
    if op == "reduce":
        return _reduce(node, args[0])
    if op == "expand":
        return np.broadcast_to(args[0], node.sh).copy()
    if op == "reshape":
        return args[0].reshape(node.sh)
    if op == "detach":
        return args[0]
    if op == "call":
        return env_call(node, args)
    raise AssertionError(op)


class Runner:
    def __init__(self, program: Program):
        self.p = program

    def __call__(self, buffers):
        memory = {slot: np.array(buffers[slot], NP[n.dt]).reshape(n.sh)
                  for slot, n in self.p.buffers.items()}
        env: dict = {}
        self._block(self.p.top, env, memory)
        return memory

    def _value(self, node, env):
        todo = [node]
        while todo:
            n = todo[-1]
            if n.id in env:
                todo.pop()
                continue
            missing = [a for a in n.args if a.id not in env]
            if missing:
                todo.extend(missing)
                continue
            todo.pop()
            env[n.id] = evaluate(n, [env[a.id] for a in n.args], self._call)
        return env[node.id]

    def _call(self, node, args):
        _, params, result, order = node.value
        env = {p.id: a for p, a in zip(params, args, strict=True)}
        for n in order:
            self._value(n, env)
        return self._value(result, env)

    def _block(self, body, env, memory):
        for s in body:
            if isinstance(s, tuple):
                node = s[1]
                if node.op == "buffer":
                    env[node.id] = None
                elif node.op == "load" and node.id not in env:
                    buf = node.args[0]
                    data = memory[buf.at[0][1]]
                    if len(node.args) == 1:
                        env[node.id] = data.copy()
                    else:
                        k = int(self._value(node.args[1], env))
                        if not 0 <= k < data.size:
                            raise IndexOutOfRange(f"index {k} out of range")
                        env[node.id] = np.array(data.reshape(-1)[k])
                else:
                    self._value(node, env)
            elif isinstance(s, Store):
                v = self._value(s.val, env)
                slot = s.buf.at[0][1]
                if s.idx is None:
                    memory[slot] = np.broadcast_to(v, s.buf.sh).astype(NP[s.buf.dt]).copy()
                else:
                    k = int(self._value(s.idx, env))
                    if not 0 <= k < memory[slot].size:
                        raise IndexOutOfRange(f"index {k} out of range")
                    flat = memory[slot].reshape(-1)
                    flat[k] = v
            else:
                tag = s.counter.tag
                for i in range(s.count):
                    for key in [key for key, n in self._scoped(env, tag)]:
                        del env[key]
                    env[s.counter.id] = np.array(i, np.int32)
                    self._block(s.body, env, memory)

    def _scoped(self, env, tag):
        nodes = self.p.g.nodes
        return [(key, nodes[key]) for key in env if nodes[key].scope == tag]


def build(source: str):
    """The protocol's entry point: parse, check and expand; raise on an invalid program."""
    return Runner(build_program(source))


# --- tapes (SPEC.md, "Tapes"), apart from the IR: numpy float32 throughout -----------------


def tape_fold(shares):
    """The sum of an entry's shares, (sender, value) pairs in arrival order: a left fold."""
    total = shares[0][1]
    for _, value in shares[1:]:
        total = np.float32(total + value)
    return total


def tape_operands(i, j):
    """The operands an entry passes shares to, in order (i == j receives twice)."""
    return (i, j)


def tape_leaf(kind, g):
    """What a leaf's derivative is, given the sum of its shares."""
    return g


def _tape_value(k, v):
    if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer):
        raise Invalid(f"entry {k}: value {v!r} is not a number")
    return np.float32(v)


def backprop(tape):
    with np.errstate(all="ignore"):  # IEEE overflow and NaN are values here, not warnings
        return _backprop(tape)


def _backprop(tape):
    if not isinstance(tape, list | tuple) or len(tape) == 0:
        raise Invalid("a tape is a non-empty list of entries")
    values: list = []
    ops: list[tuple] = []  # (kind,) for a leaf, (kind, i, j) for an operation
    for k, entry in enumerate(tape):
        if not isinstance(entry, list | tuple) or len(entry) == 0:
            raise Invalid(f"entry {k}: not an entry")
        kind = entry[0]
        if kind in ("input", "const") and len(entry) == 2:
            values.append(_tape_value(k, entry[1]))
            ops.append((kind,))
            continue
        if kind not in ("add", "mul") or len(entry) != 3:
            raise Invalid(f"entry {k}: {entry!r} is not an entry")
        i, j = entry[1], entry[2]
        for o in (i, j):
            if isinstance(o, bool) or not isinstance(o, int | np.integer) or not 0 <= o < k:
                raise Invalid(f"entry {k}: operand {o!r} is not an earlier entry")
        a, b = values[i], values[j]
        values.append(np.float32(a + b) if kind == "add" else np.float32(a * b))
        ops.append((kind, int(i), int(j)))
    received: list[list] = [[] for _ in tape]
    received[-1].append((len(tape), np.float32(1.0)))
    out = [np.float32(0.0)] * len(tape)
    for k in range(len(tape) - 1, -1, -1):
        if not received[k]:
            continue
        g = tape_fold(received[k])
        if len(ops[k]) == 1:
            out[k] = tape_leaf(ops[k][0], g)
            continue
        out[k] = g
        kind, i, j = ops[k]
        for position, operand in enumerate(tape_operands(i, j)):
            other = values[(j, i)[position]]
            received[operand].append((k, g if kind == "add" else np.float32(g * other)))
    return [float(v) for v in out]
