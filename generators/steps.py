"""The steps a program is written in: each writes one or a few statements through the
Writer, and its menus of ops derive from the op table (reference/ops.py).
docs/generators.md, "Generators".
"""

from __future__ import annotations

import numpy as np

from gradient_conformance import reference
from gradient_conformance.generators.writer import F32_LITERALS, Val, Writer, shape_text
from gradient_conformance.reference.ops import (
    OPS,
    elementwise,
)
from gradient_conformance.reference.program import Define
from gradient_conformance.reference.syntax import Operand, format_attr


def _first(names: tuple[str, ...], *first: str) -> tuple[str, ...]:
    """`names` with `first` moved to the front, in that order: the choices a step shrinks
    towards."""
    return (*first, *(n for n in names if n not in first))


# The steps' menus, from the op table. A menu's first op is what its choice shrinks to.
UNARY_F32 = _first(elementwise("f32", 1), "sin", "recip", "sqrt")
F32_BINARY = _first(elementwise("f32", 2), "mul")  # mul first: its shares carry values
I32_ARITHMETIC = tuple(op for op in elementwise("i32", 2) if op in F32_BINARY)
# C's division: signs, zero, -2^31 / -1 (SPEC.md, "Operations").
I32_DIVISION = ("idiv", "mod")
I32_BITS = tuple(op for op in elementwise("i32", 2) if op not in I32_ARITHMETIC + I32_DIVISION)
BOOL_BINARY = elementwise("bool", 2)
COMPARISONS = tuple(sorted(set(elementwise("f32", 2, result="bool")) |
                           set(elementwise("i32", 2, result="bool"))))
ZEROS = ("0.0", "-0.0")
ZEROS_FIRST = _first(F32_LITERALS, *ZEROS)
MAX_SINKS = 6  # values stored by a program, besides its gradients

# --- steps: each writes one or a few statements ----------------------------------------------


def _allowed(w: Writer, ops, dtype: str = "f32") -> list[str]:
    """The ops of a menu the program may use on `dtype` operands: neither the op nor the op
    on that dtype (`and:bool`) excluded."""
    return [op for op in ops if op not in w.exclude and f"{op}:{dtype}" not in w.exclude]


def _f32_binary(w: Writer, base) -> None:
    ops = _allowed(w, F32_BINARY)
    if not ops:
        return
    op = w.fairly(ops)
    shape = w.choose_shape("f32", base)
    a = w.pick("f32", shape, literal_ok=shape == (), recent=True)
    if not a.literal and not (op == "max" and w.smooth) and w.same():
        b = a  # max a a: a tie at every element
    elif not a.literal and w.literal_operand():
        # max %a 0.0 (relu), add %a -0.0: what implementations fold by value, so a zero at
        # least half the time.
        text = w.choose(ZEROS) if not w.flip() else w.choose(ZEROS_FIRST)
        b = Val(text, "f32", (), literal=True)
    else:
        b = w.pick("f32", shape, where=w.apart(a) if op == "max" else lambda v: True)
    w.value(op, [a, b], "f32", shape)


def _f32_unary(w: Writer, base) -> None:
    ops = _allowed(w, UNARY_F32)
    if not ops:
        return
    shape = w.choose_shape("f32", base)
    if shape == () and w.literal_operand():
        a = w.literal("f32")  # an op of a literal: a constant the build may fold
    else:
        a = w.pick("f32", shape, literal_ok=shape == (), recent=True)
    w.value(w.fairly(ops), [a], "f32", shape)


def _transcendental(w: Writer, base) -> None:
    """One of the unary ops other than the menu's first three, each as often as the others:
    with `_f32_unary` alone, whose choice shrinks towards sin, recip and sqrt, exp2 and log2
    came up in 1-2 % of programs (measured 2026-12-05; tests/test_generators.py holds the
    floor)."""
    ops = _allowed(w, UNARY_F32[3:])  # after the three the menu's choice shrinks towards
    if not ops:
        return
    shape = w.choose_shape("f32", base)
    a = w.pick("f32", shape, literal_ok=shape == (), recent=True)
    w.value(w.fairly(ops), [a], "f32", shape)


def _binary_step(dtype: str, menu: tuple[str, ...], result: str | None = None):
    """A step writing one op of `menu` on two `dtype` values of one shape."""
    def step(w: Writer, base) -> None:
        ops = _allowed(w, menu, dtype)
        if not ops or dtype not in w.dtypes or (result or dtype) not in w.dtypes:
            return
        op = w.fairly(ops)
        shape = w.choose_shape(dtype, base)
        a = w.pick(dtype, shape, literal_ok=shape == ())
        w.value(op, [a, w.pick(dtype, shape)], result or dtype, shape)
    step.__name__ = f"_{dtype}_{menu[0]}"
    return step


_i32_arithmetic = _binary_step("i32", I32_ARITHMETIC)
_i32_division = _binary_step("i32", I32_DIVISION)  # C semantics: signs, zero, -2^31 / -1
_i32_bits = _binary_step("i32", I32_BITS)
_bool_binary = _binary_step("bool", BOOL_BINARY)


def _compare(w: Writer, base) -> Val | None:
    ops = _allowed(w, COMPARISONS)
    if not ops:
        return None
    op = w.fairly(ops)
    dtype = w.dtype(*(d for d in ("f32", "i32") if f"{op}:{d}" not in w.exclude))
    if dtype is None or "bool" not in w.dtypes:
        return None
    shape = w.choose_shape(dtype, base)
    a = w.pick(dtype, shape, literal_ok=shape == ())
    b = a if not a.literal and w.same() else w.pick(dtype, shape, where=w.apart(a))
    return w.value(op, [a, b], "bool", shape)


def _where(w: Writer, base) -> None:
    if "where" in w.exclude or "bool" not in w.dtypes:
        return
    dtype = w.dtype(*(d for d in ("f32", "i32", "bool") if f"where:{d}" not in w.exclude))
    if dtype is None:
        return
    shape = w.choose_shape(dtype, base)
    conditions = [v for v in w.pool if v.dtype == "bool" and v.shape == shape]
    c = w.choose(conditions) if conditions else None
    literal = w.literal_operand()
    a = w.pick(dtype, shape, recent=True)
    b = w.pick(dtype, shape)
    # where true a b: a select the build may fold; of three literals, a scalar, so not here.
    if literal and (shape == () or not (a.literal and b.literal)):
        c = w.literal("bool")
    elif c is None:
        c = _compare_of_shape(w, shape)
        if c is None:
            return
    w.value("where", [c, a, b], dtype, shape, carry=[a, b])


def _compare_of_shape(w: Writer, shape) -> Val | None:
    if "cmplt" in w.exclude:
        return None
    a = w.pick("f32", shape, literal_ok=shape == ())
    return w.value("cmplt", [a, w.pick("f32", shape, where=w.apart(a))], "bool", shape)


def _cast(w: Writer, base) -> None:
    if "cast" in w.exclude:
        return
    source = w.dtype("f32", "i32", "bool")
    target = w.dtype("f32", "i32", "bool")
    if source is None or target is None:  # a program that may use none of the dtypes
        return
    shape = w.choose_shape(source, base)
    a = w.pick(source, shape, literal_ok=shape == (), recent=True)
    w.value("cast", [a], target, shape, attrs=f"dtype={target}")


def _bitcast(w: Writer, base) -> None:
    if "bitcast" in w.exclude or "i32" not in w.dtypes:
        return
    source, target = w.choose((("f32", "i32"), ("i32", "f32"), ("f32", "f32")))
    shape = w.choose_shape(source, base)
    # The payload of a NaN that arithmetic made is unspecified (SPEC.md, "NaN"), so only a
    # loaded value, whose bits nothing but data movement touched, is bitcast to i32.
    loaded = (lambda v: v.is_load) if target == "i32" else (lambda v: True)
    if target == "i32" and w.base not in (None, shape) and not any(
            v.dtype == source and v.shape == shape and loaded(v) for v in w.pool):
        return  # no load to take, nor a new one of this shape: pick would expand a literal
    a = w.pick(source, shape, literal_ok=shape == () and target != "i32", where=loaded)
    w.value("bitcast", [a], target, shape, attrs=f"dtype={target}")


def _usable(w: Writer, op: str, *dtypes: str) -> str | None:
    """A dtype for a step writing `op`, or None when the op is excluded or no dtype may be."""
    return None if op in w.exclude else w.dtype(
        *(d for d in dtypes if f"{op}:{d}" not in w.exclude))


def _reduce(w: Writer, base) -> None:
    dtype = _usable(w, "reduce", "f32", "i32")
    if dtype is None:
        return
    op = w.choose(("add", "max", "mul"))
    shape = w.choose_shape(dtype, base)
    a = w.pick(dtype, shape, literal_ok=shape == (), recent=True)
    op = w.untied(op, a)
    axes: tuple[int, ...] | None = None
    kind = w.integer(0, 2) if shape else 0  # all elements, one axis, or some axes
    if kind == 1:
        axes = (w.integer(0, len(shape) - 1),)
    elif kind == 2:
        axes = tuple(k for k in range(len(shape)) if w.flip())
    out: tuple[int, ...]
    if axes is None:
        out, attrs = (), f"op={op}"
    else:
        out = tuple(1 if k in axes else d for k, d in enumerate(shape))
        attrs = f"op={op} axis={shape_text(axes)}"
    w.value("reduce", [a], dtype, out, attrs=attrs, no_rule=op == "mul")


def _expand(w: Writer, base) -> None:
    """A scalar or a value with size-1 dims, expanded to the base shape."""
    dtype = _usable(w, "expand", "f32", "i32")
    if dtype is None or not base:
        return
    sources = [v for v in w.pool if v.dtype == dtype and (
        v.shape == () or (len(v.shape) == len(base) and all(
            d in (1, b) for d, b in zip(v.shape, base, strict=True))))]
    a = w.choose(sources) if sources else w.literal(dtype)
    w.value("expand", [a], dtype, base, attrs=f"shape={shape_text(base)}")


def _reshape(w: Writer, base) -> None:
    dtype = _usable(w, "reshape", "f32", "i32")
    if dtype is None:
        return
    shape = w.choose_shape(dtype, base)
    size = int(np.prod(shape))
    targets = [s for s in {(size,), base, (1, size)} if int(np.prod(s)) == size]
    target = w.choose(sorted(targets))
    a = w.pick(dtype, shape, literal_ok=False, recent=True)
    w.value("reshape", [a], dtype, target, attrs=f"shape={shape_text(target)}")


def _detach(w: Writer, base) -> None:
    """detach of an existing value, so that the value is also used beside its detach."""
    if "detach" in w.exclude:
        return
    shape = w.choose_shape("f32", base)
    a = w.pick("f32", shape, literal_ok=False, recent=True)
    d = w.value("detach", [a], "f32", shape, carry=[])
    if "mul" not in w.exclude:
        w.value("mul", [a, d], "f32", shape)


def _load_element(w: Writer, base) -> None:
    dtype = w.dtype("f32", "i32")
    if dtype is None:
        return
    shape = base if base and 0 not in base else (1,)  # an element of an empty value: none
    if (dtype, shape) not in w.inputs:
        w.input(dtype, shape)
    index = w.integer(0, int(np.prod(shape)) - 1)
    text = f"load {w.inputs[(dtype, shape)]} {index}"
    if (w.scope, text) in w.written:
        return
    name = w.fresh("e")
    w.line(f"{name} = {text}")
    v = Val(name, dtype, (), {name: False} if dtype == "f32" else {}, ranged=w.depth > 0,
            is_load=True)
    w.pool.append(v)
    w.written[(w.scope, text)] = v


def _memory(w: Writer, base) -> None:
    """Store a value and load it back: the load depends on the value through memory, which
    no gradient goes through."""
    dtype = w.dtype("f32", "i32")
    if dtype is None:
        return
    shape = w.choose_shape(dtype, base)
    v = w.pick(dtype, shape, literal_ok=False)
    scratch = w.buffer(dtype, shape, "mem")
    w.line(f"store {scratch} {v.text}")
    name = w.fresh("m")
    w.line(f"{name} = load {scratch}")
    reach = {name: False} if dtype == "f32" else {}
    reach.update({u: True for u in v.reach})
    # Not `is_load`: what it reads back was computed, and may be an arithmetic NaN.
    w.pool.append(Val(name, dtype, shape, reach, dirty=True, ranged=v.ranged))


def _reload(w: Writer, base) -> None:
    """Load an input buffer again (SPEC.md, "Hash consing"): with nothing between, or after a
    store to another buffer, the same node as the load before it under another name; after a
    store to it, a node of its own, reading what was stored (through memory, which no
    gradient goes through)."""
    if w.depth or not w.loaded:
        return
    buffer = w.choose(list(w.loaded))
    before = w.loaded[buffer]
    between = w.choose(("nothing", "a store to another buffer", "a store to it"))
    if between != "nothing":
        v = w.pick(before.dtype, before.shape, literal_ok=False)
        target = buffer if between == "a store to it" else w.buffer(v.dtype, v.shape, "mem")
        w.line(f"store {target} {v.text}")
        w.used.add(v.text)
        if target == buffer:  # no longer the caller's bits: later loads of an input, new ones
            w.inputs = {key: b for key, b in w.inputs.items() if b != buffer}
    name = w.fresh("x")
    w.line(f"{name} = load {buffer}")
    if between == "a store to it":
        reach = {name: False} if v.dtype == "f32" else {}
        reach.update({u: True for u in v.reach})
        again = Val(name, v.dtype, v.shape, reach, dirty=True, ranged=v.ranged)
        w.loaded[buffer] = again
    else:
        again = Val(name, before.dtype, before.shape, dict(before.reach), before.dirty,
                    before.ranged, is_load=before.is_load, tied=before.tied, node=before.key)
    w.pool.append(again)


def _call(w: Writer, base) -> None:
    if "call" in w.exclude:
        return
    ops = _allowed(w, ("add", "mul", "max"))
    if not ops:
        return
    if not w.functions or w.flip():
        name = f"@f{len(w.functions)}"
        body = [f"def {name} %p %q"]
        last = "%p"
        for k in range(w.integer(1, 2)):
            op = w.fairly(ops)
            other = w.choose(("%p", "%q", last))
            body.append(f"  %r{k} = {op} {last} {other}")
            last = f"%r{k}"
        body += [f"  return {last}", f"end {name}"]
        w.defs += body
        w.functions.append(name)
    function = w.choose(w.functions)
    dtype = w.dtype("f32", "i32")
    if dtype is None:
        return
    shape = w.choose_shape(dtype, base)
    a = w.pick(dtype, shape, literal_ok=shape == ())
    b = w.pick(dtype, shape, literal_ok=shape == ())  # a parameter never broadcasts
    v = w.value("call", [Val(function, "func", ()), a, b], dtype, shape, carry=[a, b],
                no_rule=True)
    v.reach = ({v.text: False} | {u: True for o in (a, b) for u in o.reach}) \
        if dtype == "f32" else {}


# Weights of a loss: each has a full mantissa in f32, so that multiplying by it rounds.
LOSS_WEIGHTS = ("0.7", "-1.3", "3.1")


def _gradient(w: Writer, base, *, reached_only: bool = False) -> None:
    """gradient of a loss made from one of the latest f32 values (so the walk is long),
    against a value it reaches (or, unless `reached_only`, one it does not: zeros)."""
    if "gradient" in w.exclude:
        return
    ys = [v for v in w.pool if v.dtype == "f32" and not v.ranged and not v.literal
          and not v.text.startswith("%g") and (v.shape == () or "reduce" not in w.exclude)]
    if not ys:
        return
    y = w.loss(ys[-1 - w.integer(0, min(len(ys), 4) - 1)], w.choose(("add", "max")))
    if w.flip() and "add" not in w.exclude:
        # The loss also adds the values nothing reads yet, so that an op written on a branch
        # of its own (a recip, a sqrt) lies on the gradient's path and not only in a store.
        for v in [v for v in w.sinks() if v in ys][-3:]:
            y = w.value("add", [y, w.loss(v, w.choose(("add", "max")))], "f32", ())
    if w.flip() and "mul" not in w.exclude:
        # A weighted loss, so that no node's gradient is 1.0 (or a power of two) from the
        # seed: a rule's share then rounds, and forms of it that are equal over the reals
        # (recip's ((g * -1.0) * u) * u) give other bits.
        weight = w.choose(LOSS_WEIGHTS)
        y = w.value("mul", [y, Val(weight, "f32", (), literal=True)], "f32", ())
    xs = w.valid_xs(y, include_unreached=not reached_only)
    xs = [v for v in xs if v.text != y.text] or xs
    if not xs:
        return
    w.gradient(y, w.choose(xs))


# Ops whose node a statement can restate from its operands and attributes alone (a load's
# node also depends on the stores before it, a range's and a call's on their bodies).
# The ops with a rule and the comparisons the rules write; not bitcast, which the steps apply
# only to loaded values (_bitcast says why).
_RESTATABLE = frozenset(name for name, op in OPS.items() if op.rules and name != "bitcast") | \
    frozenset(COMPARISONS)


def _restated_gradient(w: Writer) -> None:
    """Restate, as statements of the program, a node the last gradient's expansion built,
    and take a gradient against it of a loss made from that gradient. In the spec the
    statement is the expansion's node (SPEC.md, "Hash consing"), so the loss depends on it;
    kept apart, the gradient would be zeros. Written only when the reference confirms the
    restated statement is that node."""
    made = [v for v in w.pool if v.text.startswith("%g") and v.dtype == "f32" and not v.ranged
            and not v.dirty]
    if w.depth or not made:
        return
    g = made[-1]
    saved = (len(w.body), len(w.pool), dict(w.written), set(w.used))
    try:
        program = reference.compile_program(w.text())
    except reference.IRError:
        return
    defines = [s for s in program.statements if isinstance(s, Define)]
    define = next((s for s in defines if s.name == g.text and s.expansion), None)
    if define is None:
        return
    named = {s.node.id: s.name for s in defines}
    targets = [n for n in reversed(define.created) if n.dtype == "f32" and n.op in _RESTATABLE
               and n.id not in named]
    if not targets:
        return
    target = targets[w.integer(0, min(len(targets), 4) - 1)]
    pool = {v.text: v for v in w.pool}
    vals: dict[int, Val] = {}

    def restate(node) -> Val | None:
        """The node as a Val: a name, a literal, or statements written for it (operands
        before the node: an explicit stack, since expansions can be deep)."""
        stack = [node]
        while stack:
            n = stack[-1]
            if n.id in vals:
                stack.pop()
            elif n.id in named and named[n.id] in pool:
                vals[n.id] = pool[named[n.id]]
            elif n.op == "const" and n.shape == ():
                vals[n.id] = Val(Operand(n.dtype, "", n.attr("value")).canonical(), n.dtype,
                                 (), literal=True)
            elif n.op not in _RESTATABLE or n.scope:
                return None
            elif pending := [o for o in n.operands if o.id not in vals]:
                stack.extend(pending)
            else:
                stack.pop()
                attrs = " ".join(f"{k}={format_attr(v)}" for k, v in n.attrs)
                vals[n.id] = w.value(n.op, [vals[o.id] for o in n.operands], n.dtype, n.shape,
                                     attrs=attrs)
        return vals[node.id]

    z = restate(target)
    if z is None or z.literal or not _names_node(w, z.text, target.id):
        del w.body[saved[0]:], w.pool[saved[1]:]
        w.written, w.used = saved[2], saved[3]
        return
    w.gradient(w.loss(g), z)


def _names_node(w: Writer, name: str, node_id: int) -> bool:
    """Whether `name`, in the program written so far, is the node `node_id` of the program
    before it (node ids follow the order nodes are made, so a prefix keeps its ids)."""
    try:
        program = reference.compile_program(w.text())
    except reference.IRError:
        return False
    return any(s.node.id == node_id for s in program.statements
               if isinstance(s, Define) and s.name == name)


def _reuse(w: Writer, base) -> None:
    """The most recent value combined with the earliest one (mul or add): so the earliest
    values feed every level, and a gradient against them gathers many shares."""
    ops = _allowed(w, ("mul", "add"))
    if not ops:
        return
    f32 = [v for v in w.pool if v.dtype == "f32" and v.shape == base and not v.literal]
    if not f32:
        return
    w.value(w.fairly(ops), [f32[-1], f32[0]], "f32", base)


def _smooth_unary_step(menu):
    def step(w: Writer, base) -> None:
        _smooth_unary(w, base, menu)
    step.__name__ = f"_smooth_{menu[0]}"
    return step


def _smooth_unary(w: Writer, base, menu) -> None:
    """A unary f32 op on an argument inside its domain: sin and exp2 take any value; recip,
    log2 and sqrt take a value known to be positive (an exp2, or a*a + 0.5 written first).
    One statement whenever it can be, so that shrinking can remove it on its own."""
    ops = _allowed(w, menu)
    if not ops:
        return
    op = w.fairly(ops)
    shape = w.choose_shape("f32", base)
    if op in ("recip", "log2", "sqrt"):
        a = w.pick("f32", shape, literal_ok=False, recent=True, where=lambda v: v.positive)
        if not a.positive:  # a new input: make a positive value of it
            square = w.value("mul", [a, a], "f32", shape)
            a = w.value("add", [square, Val("0.5", "f32", (), literal=True)], "f32", shape)
            a.positive = True
    else:
        a = w.pick("f32", shape, literal_ok=False, recent=True)
    w.value(op, [a], "f32", shape).positive = op == "exp2"



def _dead_end(w: Writer, base) -> None:
    """cast (cast a dtype=i32) dtype=f32: a path through i32, which carries no gradient."""
    if "cast" in w.exclude:
        return
    shape = w.choose_shape("f32", base)
    a = w.pick("f32", shape, literal_ok=False, recent=True)
    i = w.value("cast", [a], "i32", shape, attrs="dtype=i32")
    w.value("cast", [i], "f32", shape, attrs="dtype=f32")


def _bitcast_f32(w: Writer, base) -> None:
    """bitcast f32 -> f32: the identity, through which a gradient passes."""
    if "bitcast" in w.exclude:
        return
    shape = w.choose_shape("f32", base)
    w.value("bitcast", [w.pick("f32", shape, literal_ok=shape == (), recent=True)], "f32",
            shape, attrs="dtype=f32")


def _higher_order(w: Writer, base) -> None:
    """gradient (gradient y x) x for a scalar x."""
    if "higher_order" in w.exclude or "gradient" in w.exclude:
        return
    xs = [v for v in w.pool if v.dtype == "f32" and v.shape == () and not v.ranged
          and not v.literal and not v.maybe_literal]
    if not xs:
        return
    x = w.choose(xs)
    ys = [v for v in w.pool if v.dtype == "f32" and v.shape == () and not v.ranged
          and v.reach.get(x.key) is False and not v.dirty]
    if not ys:
        return
    g = w.gradient(w.choose(ys), x)
    w.gradient(g, x)


def _loop(w: Writer, base) -> None:
    """A range whose body loads, computes and stores element by element; sometimes with a
    valid gradient inside (of values the loop does not touch), sometimes nested."""
    if "range" in w.exclude or w.depth >= 2:
        return
    count = w.integer(1, 3)
    data = w.buffer("f32", (count,), "in")
    out = w.buffer("f32", (count,), "out")
    counter = w.fresh("i")
    w.line(f"{counter} = range {count}")
    saved = len(w.pool)
    outer = w.enter()
    i = Val(counter, "i32", (), ranged=True)
    w.pool.append(i)
    e = w.fresh("e")
    w.line(f"{e} = load {data} {counter}")
    w.pool.append(Val(e, "f32", (), {e: False}, ranged=True, is_load=True))
    for _ in range(w.integer(0, 2)):
        _BODY_STEPS[w.integer(0, len(_BODY_STEPS) - 1)](w, ())
    if w.flip():
        _gradient(w, ())
    value = w.choose([v for v in w.pool[saved:] if v.dtype == "f32" and v.shape == ()])
    w.line(f"store {out} {value.text} {counter}")
    w.leave(outer, saved)
    w.line(f"end {counter}")


def _fan_in(w: Writer, base) -> None:
    """A chain that uses one value at every link, `v1 = op x x`, `v2 = op v1 x`, ...: x
    receives 8 to 10 shares, past the size where some folds switch algorithm (numpy's
    pairwise sum works in blocks of 8)."""
    ops = _allowed(w, ("add", "mul"))
    if not ops:
        return
    shape = w.choose_shape("f32", base)
    x = w.pick("f32", shape, literal_ok=False, recent=True)
    v = x
    for _ in range(w.integer(7, 9)):
        v = w.value(w.fairly(ops), [v, x], "f32", shape)


def _broadcast_back(w: Writer, base) -> None:
    """A value reduced over several of its axes and expanded back to its shape (a mean's
    shape of computation): reduce and expand over several axes, and middle ones."""
    dtype = _usable(w, "reduce", "f32", "i32")
    if dtype is None or "expand" in w.exclude:
        return
    shape = w.choose_shape(dtype, base)
    large = [k for k, d in enumerate(shape) if d > 1]
    if len(large) < 2:
        return
    a = w.pick(dtype, shape, literal_ok=False, recent=True)
    axes = tuple(k for k in range(len(shape)) if k in large[:1] or w.flip())
    op = w.untied(w.choose(("add", "max", "mul")), a)
    reduced = tuple(1 if k in axes else d for k, d in enumerate(shape))
    r = w.value("reduce", [a], dtype, reduced, attrs=f"op={op} axis={shape_text(axes)}",
                no_rule=op == "mul")
    w.value("expand", [r], dtype, shape, attrs=f"shape={shape_text(shape)}")


def _bitcast_round_trip(w: Writer, base) -> None:
    """bitcast (bitcast a dtype=i32) dtype=f32: the same bits, through an i32, which carries
    no gradient: a gradient through it is zeros. Not where the caller left i32 out of a
    program's dtypes; a differentiable program has it, since the i32 enters no pool."""
    if "bitcast" in w.exclude or ("i32" not in w.dtypes and not w.smooth):
        return
    shape = w.choose_shape("f32", base)
    a = w.pick("f32", shape, literal_ok=False, recent=True)
    name = w.fresh("k")
    w.line(f"{name} = bitcast {a.text} dtype=i32")  # not in the pool: its NaN bits are free
    w.used.add(a.text)
    k = Val(name, "i32", shape)
    w.value("bitcast", [k], "f32", shape, attrs="dtype=f32")


_BODY_STEPS = (_f32_binary, _f32_unary, _i32_arithmetic, _compare, _where, _cast, _loop,
               _call)
# Simplest first: shrinking moves towards the front.
PROGRAM_STEPS = (_f32_binary, _f32_unary, _detach, _reduce, _expand, _reshape, _where, _cast,
                 _transcendental,
                 _compare, _i32_arithmetic, _i32_division, _i32_bits, _bool_binary, _bitcast,
                 _load_element, _memory,
                 _call, _loop, _gradient, _higher_order, _fan_in, _broadcast_back,
                 _bitcast_round_trip, _reload)
# Their gradients come at the end (`_write`), of the latest values, so the walks are long.
# One step per op of a positive argument, as often as a binary op: each has a rule whose
# forms differ in the bits only when it lies on a gradient's path.
_smooth_periodic = _smooth_unary_step(("sin", "exp2"))
_smooth_recip = _smooth_unary_step(("recip",))
_smooth_log2 = _smooth_unary_step(("log2",))
_smooth_sqrt = _smooth_unary_step(("sqrt",))
DIFFERENTIABLE_STEPS = (_reuse, _f32_binary, _smooth_periodic, _smooth_recip, _smooth_log2,
                        _smooth_sqrt, _detach,
                        _reduce, _expand, _reshape, _where, _cast, _dead_end, _bitcast_f32,
                        _fan_in, _broadcast_back, _bitcast_round_trip, _reload)
STEP_SETS = {"program": PROGRAM_STEPS, "differentiable": DIFFERENTIABLE_STEPS}
