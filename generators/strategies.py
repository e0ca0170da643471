"""The strategies: each draws a whole `Case`. SPEC.md says what the programs mean.

Every strategy takes keyword-only bounds and says in its docstring what it shrinks towards.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from contextvars import ContextVar

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from gradient_conformance import reference
from gradient_conformance.generators import choices
from gradient_conformance.generators.buffers import ELEMENT_BYTES, fill, smooth_f32
from gradient_conformance.generators.case import Case
from gradient_conformance.generators.writer import SHAPES, Val, Writer, shape_text
from gradient_conformance.reference import errors, exact
from gradient_conformance.reference.ops import (
    OPS,
    TRANSCENDENTAL,
    elementwise,
    features_of_statements,
)
from gradient_conformance.reference.program import Define
from gradient_conformance.reference.syntax import Operand, format_attr, parse


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
MAX_SINKS = 6  # values stored by a program, besides its gradients

# --- steps: each writes one or a few statements ----------------------------------------------


def _allowed(w: Writer, ops) -> list[str]:
    return [op for op in ops if op not in w.exclude]


def _f32_binary(w: Writer, base) -> None:
    ops = _allowed(w, F32_BINARY)
    if not ops:
        return
    op = w.choose(ops)
    shape = w.choose_shape("f32", base)
    a = w.pick("f32", shape, literal_ok=shape == (), recent=True)
    b = w.pick("f32", shape, where=w.apart(a) if op == "max" else lambda v: True)
    w.value(op, [a, b], "f32", shape)


def _f32_unary(w: Writer, base) -> None:
    ops = _allowed(w, UNARY_F32)
    if not ops:
        return
    shape = w.choose_shape("f32", base)
    w.value(w.choose(ops),
            [w.pick("f32", shape, literal_ok=shape == (), recent=True)], "f32", shape)


def _binary_step(dtype: str, menu: tuple[str, ...], result: str | None = None):
    """A step writing one op of `menu` on two `dtype` values of one shape."""
    def step(w: Writer, base) -> None:
        ops = _allowed(w, menu)
        if not ops or dtype not in w.dtypes or (result or dtype) not in w.dtypes:
            return
        op = w.choose(ops)
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
    op = w.choose(ops)
    dtype = w.dtype("f32", "i32")
    if dtype is None or "bool" not in w.dtypes:
        return None
    shape = w.choose_shape(dtype, base)
    a = w.pick(dtype, shape, literal_ok=shape == ())
    return w.value(op, [a, w.pick(dtype, shape, where=w.apart(a))], "bool", shape)


def _where(w: Writer, base) -> None:
    if "where" in w.exclude or "bool" not in w.dtypes:
        return
    dtype = w.dtype("f32", "i32", "bool")
    shape = w.choose_shape(dtype, base)
    conditions = [v for v in w.pool if v.dtype == "bool" and v.shape == shape]
    c = w.choose(conditions) if conditions else None
    if c is None:
        c = _compare_of_shape(w, shape)
        if c is None:
            return
    a = w.pick(dtype, shape, recent=True)
    b = w.pick(dtype, shape)
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
    return None if op in w.exclude else w.dtype(*dtypes)


def _reduce(w: Writer, base) -> None:
    dtype = _usable(w, "reduce", "f32", "i32")
    if dtype is None:
        return
    op = w.choose(("add", "max", "mul"))
    shape = w.choose_shape(dtype, base)
    a = w.pick(dtype, shape, literal_ok=shape == (), recent=True)
    op = w.untied(op, a)
    axes = None
    if shape and w.flip():
        axes = tuple(k for k in range(len(shape)) if w.flip())
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
    shape = base or (1,)
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
            op = w.choose(ops)
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
    w.value(w.choose(ops), [f32[-1], f32[0]], "f32", base)


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
    op = w.choose(ops)
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
          and v.reach.get(x.text) is False and not v.dirty]
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


_BODY_STEPS = (_f32_binary, _f32_unary, _i32_arithmetic, _compare, _where, _cast, _loop)
# Simplest first: shrinking moves towards the front.
PROGRAM_STEPS = (_f32_binary, _f32_unary, _detach, _reduce, _expand, _reshape, _where, _cast,
                 _compare, _i32_arithmetic, _i32_division, _i32_bits, _bool_binary, _bitcast,
                 _load_element, _memory,
                 _call, _loop, _gradient, _higher_order)
# Their gradients come at the end (`_write`), of the latest values, so the walks are long.
# One step per op of a positive argument, as often as a binary op: each has a rule whose
# forms differ in the bits only when it lies on a gradient's path.
_smooth_periodic = _smooth_unary_step(("sin", "exp2"))
_smooth_recip = _smooth_unary_step(("recip",))
_smooth_log2 = _smooth_unary_step(("log2",))
_smooth_sqrt = _smooth_unary_step(("sqrt",))
DIFFERENTIABLE_STEPS = (_reuse, _f32_binary, _smooth_periodic, _smooth_recip, _smooth_log2,
                        _smooth_sqrt, _detach,
                        _reduce, _expand, _reshape, _where, _cast, _dead_end, _bitcast_f32)
STEP_SETS = {"program": PROGRAM_STEPS, "differentiable": DIFFERENTIABLE_STEPS}


# --- whole programs ---------------------------------------------------------------------------


# The writer of the program being drawn. A step strategy takes only plain values (a step
# set's name, a shape, a flag), never the writer or functions: their reprs hold memory
# addresses, and a strategy's arguments must be the same in every process for derandomized
# runs to repeat. Being plain values, they also let each step's strategy be made once
# (functools.cache), as choices.py says why.
_WRITER: ContextVar[Writer] = ContextVar("writer")


@functools.cache
@st.composite
def _step(draw, step_set: str, base, forced: bool) -> bool:
    """One step, or the end of the program (False). Its choices, the continue flag included,
    form one span of Hypothesis's choices, so the shrinker can delete a whole step."""
    w = _WRITER.get()
    outer, w.stream.draw = w.stream.draw, draw
    try:
        if not forced and w.integer(0, 5) == 0:
            return False
        w.choose(STEP_SETS[step_set])(w, base)
    finally:
        w.stream.draw = outer
    return True


def _write(draw, *, steps, min_steps, max_steps, exclude, min_gradients, store_values,
           reached_only: bool = False, inputs: int = 0, shapes=SHAPES,
           dtypes=("f32", "i32", "bool")) -> Writer:
    assert "f32" in dtypes, "every program computes in f32"
    w = Writer(draw, exclude=frozenset(exclude))
    base = w.choose(shapes)
    w.base = base
    # Differentiable programs compute in f32; bools are their conditions.
    w.dtypes = ("f32", "bool") if reached_only else tuple(dtypes)
    w.smooth = reached_only
    for _ in range(inputs):
        w.input("f32", base)
    token = _WRITER.set(w)
    try:
        # A step that finds nothing to write on (a gradient with no f32 value yet) is not
        # one of the min_steps: a program of none is no case.
        taken = 0
        for _ in range(max_steps):
            before = len(w.body)
            if not draw(_step(steps, base, taken < min_steps)):
                break
            taken += len(w.body) > before
    finally:
        _WRITER.reset(token)
    wanted = min_gradients + (w.integer(0, 1) if min_gradients else 0)
    for _ in range(4 * max(wanted, 1)):
        if w.gradients >= wanted:
            break
        if not any(v.dtype == "f32" and not v.literal for v in w.pool):
            w.input("f32", base)
        _gradient(w, base, reached_only=reached_only)
    if w.gradients and "gradient" not in w.exclude and w.integer(0, 3) == 3:
        _restated_gradient(w)
    if reached_only and w.gradients and w.flip():
        _higher_order(w, base)
    stored = [v for v in w.pool if v.text.startswith("%g")]
    if store_values or not stored:
        stored += [v for v in w.sinks() if v not in stored][:MAX_SINKS]
    for v in stored:
        w.store(v)
    return w


def _case(draw, w: Writer, *, mode: str, kind: str, expect_error=None, how: str = "",
          f32_values=None) -> Case:
    """The case the writer wrote, from one parse of its program: its buffers, its kink
    distance (in smooth mode), its features and its description all read those statements."""
    source, statements = w.program()
    buffers, distance = fill(draw, statements, mode=mode, f32_values=f32_values)
    features = features_of_statements(statements)
    return Case(source, buffers, expect_error, how or _describe(kind, statements, features),
                distance, features, tuple(statements))


@st.composite
def programs(draw, *, min_steps: int = 1, max_steps: int = 12, exclude=frozenset(),
             shapes=SHAPES, dtypes=("f32", "i32", "bool"), inputs: str = "anything") -> Case:
    """Valid programs that mix every op of the IR: f32, i32 and bool; shapes from scalars to
    rank 3; shared literals; loads and stores with and without indices; ranges (nested);
    def/call; detach; several gradients; gradients of gradients. `exclude` names ops (or
    `higher_order`) never to use; `shapes` are the base shapes to draw from (reductions make
    others); `dtypes` the dtypes values may have (f32 always; range counters and indices are
    i32 regardless). Shrinks towards fewer steps, the simplest kinds of step (f32 mul
    first), the first shape, and the earliest values."""
    return _program(draw, min_steps, max_steps, exclude, shapes, dtypes, inputs)


def _program(draw, min_steps, max_steps, exclude, shapes, dtypes, inputs) -> Case:
    """A programs() case, drawn with the caller's draw: a strategy drawn from inside another
    would be made, and validated, anew for every case (choices.py)."""
    w = _write(draw, steps="program", min_steps=min_steps, max_steps=max_steps,
               exclude=exclude, min_gradients=0, store_values=True, shapes=shapes,
               dtypes=dtypes)
    return _case(draw, w, mode=inputs, kind="program")


@st.composite
def exact_programs(draw, *, min_steps: int = 1, max_steps: int = 12, exclude=frozenset(),
                   shapes=SHAPES, dtypes=("f32", "i32", "bool"), inputs: str = "anything"
                   ) -> Case:
    """programs() without exp2, log2 and sin: what an implementation that rounds only the IEEE
    basic operations correctly must still get right bit for bit. Shrinks as programs()."""
    return _program(draw, min_steps, max_steps, frozenset(exclude) | TRANSCENDENTAL, shapes,
                    dtypes, inputs)


def _smooth_values(s: choices.Stream) -> list[float]:
    """Two to six distinct smooth f32 values: a differentiable program's inputs, drawn
    before it (see below)."""
    values: list[float] = []
    for _ in range(s.integer(2, 6)):
        value = smooth_f32(s)
        if value not in values:
            values.append(value)
    return values


@st.composite
def differentiable_programs(draw, *, min_steps: int = 1, max_steps: int = 10,
                            min_gradients: int = 1, exclude=frozenset(), shapes=SHAPES,
                            inputs: str = "smooth", store_values: bool | None = None) -> Case:
    """A scalar f32 loss and one or more gradients against loads or intermediate nodes, in
    DAGs where values are reused (beside their own detach too), with inputs kept away from
    kinks (the distance is on the case). Shrinks towards a single gradient of few steps, a
    scalar x, and storing only the gradient."""
    # The input values come first, so that they stay put while the program shrinks.
    first = choices.Stream(draw, 1 + 6 * ELEMENT_BYTES + 1)
    values = _smooth_values(first) if inputs == "smooth" else None
    keep = first.flip() if store_values is None else store_values
    w = _write(draw, steps="differentiable", min_steps=min_steps, max_steps=max_steps,
               exclude=exclude, min_gradients=min_gradients, store_values=keep,
               reached_only=True, inputs=1, shapes=shapes)
    assume(w.gradients >= min_gradients)
    return _case(draw, w, mode=inputs, kind="differentiable program", f32_values=values)


def _describe(kind: str, statements, features) -> str:
    gradients = sum(1 for s in statements if s.op == "gradient")
    return f"{kind}: {len(statements)} statements, {gradients} gradients; uses " + \
        " ".join(sorted(features))


# --- order-sensitive gradients ------------------------------------------------------------------

# Share values that cancel and absorb each other in f32.
ORDER_CONSTANTS = ("1e8", "-1e8", "1.0", "3.0", "16777216.0", "-16777216.0", "0.5", "-3.0",
                   "1e-8", "7.0")
# Distinct small shares, for the constants built when the drawn ones tell nothing.
SMALL_SHARES = ("1.0", "3.0", "7.0", "0.5", "-3.0", "1e-8")


def _sum_tree(s: choices.Stream, lines: list[str], leaves: list[str], prefix: str) -> str:
    """Add the leaves in a random tree (repeatedly two of the partial sums), writing the adds
    as %{prefix}0, %{prefix}1, ...; the root's name."""
    partial, n = list(leaves), 0
    while len(partial) > 1:
        a = partial.pop(s.integer(0, len(partial) - 1))
        b = partial.pop(s.integer(0, len(partial) - 1))
        lines.append(f"%{prefix}{n} = add {a} {b}")
        partial.append(f"%{prefix}{n}")
        n += 1
    return partial[0]


@st.composite
def order_sensitive_gradients(draw, *, min_shares: int = 3, max_shares: int = 6) -> Case:
    """x receives min_shares..max_shares shares c_k (y is a sum of x * c_k, the c_k loaded, in
    a random tree and order) whose f32 sum depends on the order: the spec's arrival order
    gives different bits from program order and from reversed arrival order. Sometimes y
    also adds a detached second tree over the same terms first: it passes no share, but the
    walk's post-order descends through it, so it alone decides the arrival order (SPEC.md,
    "The walk"), which must then give other bits than the order without it. Where the trees
    drawn make two of these orders fold alike, one is mirrored, and where the constants
    drawn do not tell them apart, others are built that do: at most 1% of draws are thrown
    away. Shrinks towards three shares, the first constants and no shadow."""
    s = choices.Stream(draw)
    count = s.integer(min_shares, max_shares)
    constants = [s.choose(ORDER_CONSTANTS) for _ in range(count)]
    lines = ["%xin = buffer slot=0 dtype=f32 shape=[]",
             f"%cin = buffer slot=1 dtype=f32 shape=[{count}]",
             "%out = buffer slot=2 dtype=f32 shape=[]", "%x = load %xin"]
    lines += [f"%c{k} = load %cin {k}" for k in range(count)]
    terms = []
    for k in range(count):
        swap = s.flip()
        lines.append(f"%t{k} = mul {'%c' + str(k) if swap else '%x'} "
                     f"{'%x' if swap else '%c' + str(k)}")
        terms.append(f"%t{k}")
    y = _sum_tree(s, lines, terms, "s")
    ending = [f"%g = gradient {y} %x", "store %out %g"]
    shadowed = s.flip()
    root = y
    if shadowed:
        shadow = _sum_tree(s, lines, s.order(terms), "w")
        lines += [f"%d = detach {shadow}", f"%y = add %d {y}"]
        ending[0] = "%g = gradient %y %x"
        root = "%y"
    arrival = walked_order(lines, root)
    program_order = list(range(count))
    # Where the trees drawn make the arrival order fold as an order it must be told from,
    # mirror a tree (its adds' operands swapped), which reverses the order it decides.
    if _alike(arrival, program_order):
        lines = _mirrored(lines, "w" if shadowed else "s")
        arrival = walked_order(lines, root)
    if shadowed and _alike(arrival, walked_order(lines, y)):
        lines = _mirrored(lines, "s")
    if shadowed:
        unshadowed, arrival = walked_order(lines, y), walked_order(lines, root)
    source = "\n".join(lines + ending) + "\n"
    orders = [program_order, list(reversed(arrival))] + ([unshadowed] if shadowed else [])
    # The constants drawn, or the first rotation of them whose sum tells the arrival order
    # from the others: cheap to try (nothing is built), so few draws are thrown away.
    rotations = [constants[r:] + constants[:r] for r in range(count)]
    constants = next((c for c in rotations + _cancelling(arrival) if _tells(c, arrival, orders)),
                     None)
    assume(constants is not None)  # only where none of the constants tried tells them
    bits = [_constant_bits(c) for c in constants]
    x = smooth_f32(s)
    buffers = {0: np.array(x, np.float32), 1: exact.to_numpy_f32(bits),
               2: np.zeros((), np.float32)}
    statements = parse(source)
    return Case(source, buffers, None, f"order-sensitive: x receives {count} shares "
                f"{', '.join(constants[k] for k in arrival)} in arrival order"
                f"{', set by a detached tree' if shadowed else ''}",
                features=features_of_statements(statements), parsed=tuple(statements))


def _alike(order: list[int], other: list[int]) -> bool:
    """Whether the f32 left folds of any shares in these two orders are equal: only where the
    orders differ at most in their first two, which the first add takes in either order."""
    return order[2:] == other[2:] and set(order[:2]) == set(other[:2])


def _mirrored(lines: list[str], prefix: str) -> list[str]:
    """The lines with the operands of every add %{prefix}N swapped: the tree's leaves, read
    left to right, come in reverse."""
    def mirror(line: str) -> str:
        name, _, rest = line.partition(" = ")
        _, a, b = rest.split()
        return f"{name} = add {b} {a}"
    return [mirror(line) if line.startswith(f"%{prefix}") and " = add " in line else line
            for line in lines]


def _cancelling(arrival: list[int]) -> list[list[str]]:
    """Constants built to tell the arrival order from others, when the drawn ones do not:
    1e8 and -1e8 cancel, and the other shares are small, which an order that meets either
    big one first (ulp(1e8) = 8) absorbs. One placement of the pair per two positions in the
    arrival order, the pair arriving one after the other first; the pair apart tells the
    orders that differ only past it (0 1 3 2 from 0 1 2 3 and from its own reverse). The
    small shares are all 1.0, then distinct, so that which of them survive also tells. Tried
    on 10,121 random arrival orders of 3 to 6 shares, each against program order, its own
    reverse and half the time one more order, none folding alike with it, they tell all but
    two."""
    pairs = sorted(itertools.combinations(range(len(arrival)), 2), key=lambda p: p[1] - p[0])
    built = []
    for small in (["1.0"] * len(arrival), SMALL_SHARES[:len(arrival)]):
        for i, j in pairs:
            constants = [""] * len(arrival)
            for position, k in enumerate(arrival):
                constants[k] = small[position]
            constants[arrival[i]], constants[arrival[j]] = "1e8", "-1e8"
            built.append(constants)
    return built


@functools.cache
def _constant_bits(text: str) -> int:
    """The f32 bits of a share constant, read once: the constants are few, and reading a
    decimal exactly is the dearest step of trying them."""
    return exact.f32_from_text(text)


def _tells(constants: list[str], arrival: list[int], others: list[list[int]]) -> bool:
    """Whether the f32 left fold of the constants in arrival order differs from each fold
    in the `others` orders."""
    bits = [_constant_bits(c) for c in constants]
    fold = exact.f32_fold([bits[k] for k in arrival])
    return not any(exact.same_f32(fold, exact.f32_fold([bits[k] for k in order]))
                   for order in others)


def walked_order(lines: list[str], root: str) -> list[int]:
    """The order in which x's shares arrive, as indices k of the terms %t{k} = mul x c_k,
    read from the lines of an order-sensitive program as the spec's walk takes them
    (SPEC.md, "The walk"): the reverse of the post-order from the loss (operands left to
    right, each node once), the adds hash-consed as the reference does (one node per
    operator and operands). Nothing is built: drawing stays cheap. `arrival_order` builds
    the program and reads the reference's own walk; a test holds the two equal."""
    node: dict[str, tuple] = {}
    for line in lines:
        name, equals, rest = line.partition(" = ")
        if not equals:
            continue  # a store: no node
        op, *operands = rest.split()
        if op == "mul" and name.startswith("%t"):
            node[name] = ("term", int(name[2:]))
        elif op in ("add", "detach"):
            node[name] = (op, *(node[o] for o in operands))
    order, seen, stack = [], set(), [(node[root], False)]
    while stack:  # iterative: a deep tree must not recurse
        key, done = stack.pop()
        if done:
            order.append(key)
        elif key not in seen:
            seen.add(key)
            stack.append((key, True))
            if key[0] != "term":
                stack.extend((child, False) for child in reversed(key[1:]))
    return [key[1] for key in reversed(order) if key[0] == "term"]


def arrival_order(source: str) -> list[int]:
    """The order in which x's shares arrive in the reference, as indices k of the terms
    %t{k} = mul x c_k of an order-sensitive program."""
    program = reference.compile_program(source)
    expansion = next(s.expansion for s in program.statements
                     if isinstance(s, Define) and s.expansion)
    visit = next(v for v in expansion.visits if v.node is expansion.x)
    order = []
    for share in visit.shares:  # each share is mul g c_k
        loaded = next(o for o in share.operands if o.op == "load")
        order.append(loaded.operands[1].attr("value"))
    return order


# --- invalid gradients and near misses -----------------------------------------------------------


def _noise(w: Writer, base, *, max_steps: int = 3) -> None:
    for _ in range(w.integer(0, max_steps)):
        noise = DIFFERENTIABLE_STEPS[:-1]
        noise[w.integer(0, len(noise) - 1)](w, base)


def _deep(w: Writer, v: Val) -> Val:
    """Bury a value under a few more ops, so the offending node is deep in the graph."""
    for _ in range(w.integer(0, 2)):
        op = w.choose(("sin", "add", "mul"))
        if op == "sin":
            v = w.value("sin", [v], "f32", v.shape)
        else:
            v = w.value(op, [v, w.literal("f32")], "f32", v.shape)
    return v


def _loss_not_scalar(w, base, x):
    kind = w.choose(("shape [1]", "unreduced", "i32", "bool", "buffer"))
    if kind == "shape [1]":
        r = w.value("reduce", [x], "f32", (), attrs="op=add")
        y = w.value("reshape", [r], "f32", (1,), attrs="shape=[1]")
    elif kind == "unreduced":
        y = w.value("mul", [x, x], "f32", x.shape) if x.shape else \
            w.value("expand", [x], "f32", (2,), attrs="shape=[2]")
    elif kind == "i32":
        y = w.value("cast", [w.loss(x)], "i32", (), attrs="dtype=i32")
    elif kind == "bool":
        y = w.value("cmplt", [w.loss(x), w.literal("f32")], "bool", ())
    else:
        y = Val(w.inputs[("f32", base)], "f32", base)
    return y, x, f"the loss is {kind}"


def _x_not_f32(w, base, x):
    kind = w.choose(("i32", "bool", "buffer"))
    loss = w.loss(x)
    if kind == "i32":
        k = w.value("cast", [x], "i32", x.shape, attrs="dtype=i32")
        f = w.value("cast", [k], "f32", x.shape, attrs="dtype=f32")
        return w.loss(w.value("mul", [f, x], "f32", x.shape)), k, "x is an i32"
    if kind == "bool":
        c = w.value("cmplt", [x, w.literal("f32")], "bool", x.shape)
        s = w.value("where", [c, x, w.literal("f32")], "f32", x.shape, carry=[x])
        return w.loss(s), c, "x is a bool"
    return loss, Val(w.inputs[("f32", base)], "f32", base), "x is a buffer"


def _x_literal(w, base, x):
    text = w.choose(("2.0", "0.5", "-1.0"))
    lit = Val(text, "f32", (), literal=True)
    shared = w.value("mul", [x, lit], "f32", x.shape)
    y = w.loss(w.value("mul", [shared, lit], "f32", x.shape))
    return y, lit, "x is a literal that other nodes share"


def _open_range(w, base, x):
    kind = w.choose(("counter", "body load in y", "body load as x", "outer"))
    count = w.integer(1, 3)
    data = w.buffer("f32", (count,), "in")
    loss = w.loss(x)
    i = w.fresh("i")
    w.line(f"{i} = range {count}")
    w.depth += 1
    if kind == "outer":
        j = w.fresh("j")
        w.line(f"{j} = range 2")
        w.depth += 1
    f = w.fresh("f")
    w.line(f"{f} = cast {i} dtype=f32")
    e = w.fresh("e")
    w.line(f"{e} = load {data} {i}")
    if kind in ("counter", "outer"):
        y, target = w.fresh("y"), x.text
        w.line(f"{y} = mul {loss.text} {f}")
    elif kind == "body load in y":
        y, target = w.fresh("y"), x.text
        w.line(f"{y} = mul {loss.text} {e}")
    else:
        y, target = loss.text, e
    g = w.fresh("g")
    w.line(f"{g} = gradient {y} {target}")
    if kind == "outer":
        w.depth -= 1
        w.line(f"end {j}")
    w.depth -= 1
    w.line(f"end {i}")
    return None, None, f"y or x depends on an open range ({kind})"


def _no_rule(w, base, x):
    kind = w.choose(("reduce op=mul", "call", "store and load", "element store",
                     "store in a loop"))
    if kind == "reduce op=mul":
        blocked = w.value("reduce", [x], "f32", (), attrs="op=mul", no_rule=True)
    elif kind == "call":
        if not w.functions:
            w.defs += ["def @twice %p", "  %q = add %p %p", "  return %q", "end @twice"]
            w.functions.append("@twice")
            blocked = w.value("call", [Val("@twice", "func", ()), x], "f32", x.shape,
                              no_rule=True)
        else:
            blocked = w.value("call", [Val(w.functions[0], "func", ()), x, x], "f32", x.shape,
                              no_rule=True)
    else:
        if kind == "store in a loop":
            count = x.shape[0] if len(x.shape) == 1 else 2
            scratch = w.buffer("f32", (count,), "mem")
            i = w.fresh("i")
            s = w.loss(x)
            w.line(f"{i} = range {count}")
            w.line(f"  store {scratch} {s.text} {i}")
            w.line(f"end {i}")
            loaded = w.fresh("m")
            w.line(f"{loaded} = load {scratch}")
            blocked = Val(loaded, "f32", (count,))
        elif kind == "element store":
            scratch = w.buffer("f32", (2,), "mem")
            s = w.loss(x)
            w.line(f"store {scratch} {s.text} 0")
            loaded = w.fresh("m")
            w.line(f"{loaded} = load {scratch} 1")
            blocked = Val(loaded, "f32", ())
        else:
            scratch = w.buffer("f32", x.shape, "mem")
            w.line(f"store {scratch} {x.text}")
            loaded = w.fresh("m")
            w.line(f"{loaded} = load {scratch}")
            blocked = Val(loaded, "f32", x.shape)
    deep = _deep(w, w.loss(blocked))
    y = w.value("mul", [deep, w.loss(x)], "f32", ())
    return y, x, f"the walk meets a node with no rule ({kind})"


def _in_function(w, base, x):
    called = w.flip()
    w.defs += ["def @grad %p", "  %q = mul %p %p", "  %r = gradient %q %p", "  return %r",
               "end @grad"]
    if called:
        s = w.loss(x)
        w.value("call", [Val("@grad", "func", ()), s], "f32", (), no_rule=True)
    return None, None, "a gradient in a function body" + ("" if called else " never called")


DISGUISES: dict[str, Callable] = {
    errors.LOSS_NOT_F32_SCALAR: _loss_not_scalar,
    errors.X_NOT_F32: _x_not_f32,
    errors.X_LITERAL: _x_literal,
    errors.OPEN_RANGE: _open_range,
    errors.NO_RULE: _no_rule,
    errors.IN_FUNCTION: _in_function,
}


@st.composite
def invalid_gradients(draw, *, rules=errors.RULES, max_noise: int = 3) -> Case:
    """One program per rejection rule (SPEC.md, "When gradient is rejected"), in disguises: the
    offending node deep in the graph, x reached through a store and a load, a reduce op=mul or
    a call on the path, a loss of shape [1], x an i32, a bool, a buffer or a shared literal, y
    or x depending on the range, a gradient in a function body. Valid noise surrounds it.
    Shrinks towards the first rule, its first disguise, and no noise."""
    w = Writer(draw, prune=False)
    rule = w.choose(tuple(rules))
    base = w.choose(SHAPES[:2])
    w.input("f32", base)
    _noise(w, base, max_steps=max_noise)
    x = w.pick("f32", base, literal_ok=False)
    y, target, how = DISGUISES[rule](w, base, x)
    if y is not None:
        name = w.fresh("g")
        w.line(f"{name} = gradient {y.text} {target.text}")
    return _case(draw, w, mode="anything", kind="invalid", expect_error=rule,
                 how=f"invalid [{rule}]: {how}")


def _reduce_mul_off_path(w, base, x, other):
    kind = w.choose(("data x does not reach", "behind detach", "behind i32"))
    if kind == "behind detach":
        source = w.value("detach", [x], "f32", x.shape, carry=[])
    elif kind == "behind i32":
        k = w.value("cast", [x], "i32", x.shape, attrs="dtype=i32")
        source = w.value("cast", [k], "f32", x.shape, attrs="dtype=f32")
    else:
        source = other
    p = w.value("reduce", [source], "f32", (), attrs="op=mul", no_rule=True)
    return w.value("add", [w.loss(w.value("mul", [x, x], "f32", x.shape)), p], "f32", ()), x, \
        f"a reduce op=mul {kind}"


def _call_off_path(w, base, x, other):
    kind = w.choose(("data x does not reach", "behind detach", "behind i32"))
    if kind == "behind i32":
        w.defs += ["def @sq %p", "  %q = cast %p dtype=f32", "  %r = mul %q %q", "  return %r",
                   "end @sq"]
        k = w.value("cast", [x], "i32", x.shape, attrs="dtype=i32")
        arg = k
    else:
        w.defs += ["def @sq %p", "  %r = mul %p %p", "  return %r", "end @sq"]
        arg = w.value("detach", [x], "f32", x.shape, carry=[]) if kind == "behind detach" \
            else other
    c = w.value("call", [Val("@sq", "func", ()), arg], "f32", x.shape, carry=[], no_rule=True)
    y = w.value("add", [w.loss(w.value("mul", [x, x], "f32", x.shape)), w.loss(c)], "f32", ())
    return y, x, f"a call {kind}"


def _memory_off_path(w, base, x, other):
    kind = w.choose(("stored data x does not reach", "overwritten store",
                     "load before the store"))
    scratch = w.buffer("f32", x.shape, "mem")
    loaded = w.fresh("m")
    if kind == "stored data x does not reach":
        w.line(f"store {scratch} {other.text}")
        w.line(f"{loaded} = load {scratch}")
    elif kind == "overwritten store":
        w.line(f"store {scratch} {x.text}")
        w.line(f"store {scratch} {w.literal('f32').text}")
        w.line(f"{loaded} = load {scratch}")
    else:
        w.line(f"{loaded} = load {scratch}")
        w.line(f"store {scratch} {x.text}")
    m = Val(loaded, "f32", x.shape)
    y = w.loss(w.value("mul", [m, x], "f32", x.shape))
    return y, x, f"a load that x does not reach ({kind})"


def _independent(w, base, x, other):
    return w.loss(w.value("sin", [other], "f32", other.shape)), x, "y does not depend on x"


def _gradient_in_loop(w, base, x, other):
    y = w.loss(w.value("mul", [x, x], "f32", x.shape))
    count = w.integer(1, 3)
    out = w.buffer("f32", (count,), "out")
    i = w.fresh("i")
    w.line(f"{i} = range {count}")
    g = w.fresh("g")
    w.line(f"  {g} = gradient {y.text} {x.text}")
    flat = w.fresh("v")
    if x.shape:
        w.line(f"  {flat} = reduce {g} op=add")
        w.line(f"  store {out} {flat} {i}")
    else:
        w.line(f"  store {out} {g} {i}")
    w.line(f"end {i}")
    return None, None, "a gradient inside a loop that depends on nothing of the loop"


def _x_without_rule(w, base, x, other):
    p = w.value("reduce", [x], "f32", (), attrs="op=mul", no_rule=True)
    y = w.value("mul", [p, p], "f32", ())
    return y, p, "x is a reduce op=mul node: the walk stops at x"


def _detached_loss(w, base, x, other):
    s = w.loss(w.value("mul", [x, x], "f32", x.shape))
    return w.value("detach", [s], "f32", (), carry=[]), x, "the loss is a detach"


NEAR_MISSES: tuple[Callable, ...] = (_reduce_mul_off_path, _call_off_path, _memory_off_path,
                                     _independent, _gradient_in_loop, _x_without_rule,
                                     _detached_loss)


@st.composite
def near_misses(draw, *, max_noise: int = 3) -> Case:
    """Valid programs that look invalid, each of which must be accepted: a reduce op=mul, call
    or load off the path, or reachable only through detach or an i32 cast; x a load or a node
    with no rule; y not depending on x; a gradient inside a loop that depends on nothing of
    the loop; a detached loss. Shrinks towards the first kind and no noise."""
    w = Writer(draw, prune=False)
    make = w.choose(NEAR_MISSES)
    base = w.choose(SHAPES[:2])
    x = w.input("f32", base)
    other = w.input("f32", base)
    _noise(w, base, max_steps=max_noise)
    y, target, how = make(w, base, x, other)
    if y is not None:
        g = w.gradient(y, target)
        w.store(g)
    return _case(draw, w, mode="anything", kind="near miss", how=f"near miss: {how}")

