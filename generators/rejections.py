"""Invalid gradients, one per rejection rule, and near misses that must be accepted:
`invalid_gradients` and `near_misses`. docs/generators.md, "Generators"; SPEC.md, "When
gradient is rejected".
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from gradient_conformance.generators.bounds import Bounds
from gradient_conformance.generators.case import Case
from gradient_conformance.generators.programs import _case
from gradient_conformance.generators.steps import DIFFERENTIABLE_STEPS, _bitcast_f32
from gradient_conformance.generators.writer import SHAPES, Val, Writer
from gradient_conformance.reference import errors

# --- invalid gradients and near misses -----------------------------------------------------------


# The steps noise is made of: the short ones.
_NOISE = DIFFERENTIABLE_STEPS[:DIFFERENTIABLE_STEPS.index(_bitcast_f32)]


def _noise(w: Writer, base, *, max_steps: int = 3) -> None:
    for _ in range(w.integer(0, max_steps)):
        _NOISE[w.integer(0, len(_NOISE) - 1)](w, base)


def _deep(w: Writer, v: Val) -> Val:
    """Bury a value under a few more ops, so the offending node is deep in the graph."""
    for _ in range(w.integer(0, 2)):
        op = w.choose(("sin", "add", "mul"))
        if op == "sin":
            v = w.value("sin", [v], "f32", v.shape)
        else:
            v = w.value(op, [v, w.literal("f32")], "f32", v.shape)
    return v


def _loss_not_scalar(w, base, x, kind):
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


def _x_not_f32(w, base, x, kind):
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


def _x_literal(w, base, x, kind):
    if kind == "the zero gradient":
        # The gradient of a scalar that received nothing is the literal 0.0 (gradient.md:
        # "the result is zeros of x's shape (`0.0`, ...)"), shared like any 0.0.
        s = w.loss(x)
        cut = w.loss(w.value("detach", [x], "f32", x.shape, carry=[]))
        zero = w.fresh("g")
        w.line(f"{zero} = gradient {cut.text} {s.text}")
        z = Val(zero, "f32", ())
        return w.value("mul", [s, z], "f32", ()), z, \
            "x is the gradient of a scalar that received nothing: the literal 0.0"
    text = w.choose(("2.0", "0.5", "-1.0"))
    lit = Val(text, "f32", (), literal=True)
    shared = w.value("mul", [x, lit], "f32", x.shape)
    y = w.loss(w.value("mul", [shared, lit], "f32", x.shape))
    return y, lit, "x is a literal that other nodes share"


def _open_range(w, base, x, kind):
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
    elif kind == "body load through a detach":
        # It depends on the range all the same: a detach stops gradients, not dependence.
        d, y, target = w.fresh("d"), w.fresh("y"), x.text
        w.line(f"{d} = detach {e}")
        w.line(f"{y} = mul {loss.text} {d}")
    elif kind == "counter through an i32":
        k, y, target = w.fresh("k"), w.fresh("y"), x.text
        w.line(f"{k} = cast {i} dtype=f32")
        w.line(f"{y} = add {loss.text} {k}")
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


# A call reached by x through its argument is on the walk's path whatever its body does
# with the parameter (SPEC.md, "Depends on x": a node with an f32 operand that depends on x),
# so each of these is rejected; an implementation that reads the dependence off the inlined
# body accepts those whose body drops, detaches or casts it. Each: the body, and whether its
# value is a scalar (a body that drops the parameter returns one).
CALL_BODIES: dict[str, tuple[tuple[str, ...], bool]] = {
    "call using its parameter": (("  %q = mul %p %p",), False),
    "call dropping its parameter": (("  %q = mul 2.0 3.0",), True),
    "call detaching its parameter": (("  %d = detach %p", "  %q = mul %d %d"), False),
    "call casting its parameter": (("  %k = cast %p dtype=i32", "  %q = cast %k dtype=f32"),
                                   False),
    "call of a call": (("  %q = call @uses %p",), False),
}


def _call_body(w: Writer, x: Val, kind: str) -> Val:
    body, scalar = CALL_BODIES[kind]
    name = "@" + kind.split()[1]
    if "call @uses" in "".join(body):
        w.defs += ["def @uses %p", "  %q = mul %p %p", "  return %q", "end @uses"]
    w.defs += [f"def {name} %p", *body, "  return %q", f"end {name}"]
    return w.value("call", [Val(name, "func", ()), x], "f32", () if scalar else x.shape,
                   no_rule=True)


def _no_rule(w, base, x, kind):
    if kind in CALL_BODIES:
        blocked = _call_body(w, x, kind)
    elif kind == "reduce op=mul":
        blocked = w.value("reduce", [x], "f32", (), attrs="op=mul", no_rule=True)
    elif kind == "reduce op=mul axis=":
        # The same op with its axes written: the form a rejection rule may be checked by.
        axes = "[" + ",".join(map(str, range(len(x.shape)))) + "]"
        blocked = w.value("reduce", [x], "f32", tuple(1 for _ in x.shape),
                          attrs=f"op=mul axis={axes}" if x.shape else "op=mul", no_rule=True)
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
        elif kind == "two stores and loads":
            # x stored, loaded, stored into a second buffer and loaded again.
            first, second = w.buffer("f32", x.shape, "mem"), w.buffer("f32", x.shape, "mem")
            hop, loaded = w.fresh("m"), w.fresh("m")
            w.line(f"store {first} {x.text}")
            w.line(f"{hop} = load {first}")
            w.line(f"store {second} {hop}")
            w.line(f"{loaded} = load {second}")
            blocked = Val(loaded, "f32", x.shape)
        else:
            scratch = w.buffer("f32", x.shape, "mem")
            w.line(f"store {scratch} {x.text}")
            loaded = w.fresh("m")
            w.line(f"{loaded} = load {scratch}")
            blocked = Val(loaded, "f32", x.shape)
    deep = _deep(w, w.loss(blocked))
    y = w.value("mul", [deep, w.loss(x)], "f32", ())
    return y, x, f"the walk meets a node with no rule ({kind})"


def _in_function(w, base, x, kind):
    called = kind == "called"
    w.defs += ["def @grad %p", "  %q = mul %p %p", "  %r = gradient %q %p", "  return %r",
               "end @grad"]
    if called:
        s = w.loss(x)
        w.value("call", [Val("@grad", "func", ()), s], "f32", (), no_rule=True)
    return None, None, "a gradient in a function body" + ("" if called else " never called")


# Per rule, how it is broken, and its disguises. Drawn as one list of (rule, disguise), so
# that each disguise is as likely as any other (a rule of six disguises is not six times
# rarer in each of them), and shrinking goes towards the first.
DISGUISES: dict[str, tuple[Callable, tuple[str, ...]]] = {
    errors.LOSS_NOT_F32_SCALAR: (_loss_not_scalar, ("shape [1]", "unreduced", "i32", "bool",
                                                    "buffer")),
    errors.X_NOT_F32: (_x_not_f32, ("i32", "bool", "buffer")),
    errors.X_LITERAL: (_x_literal, ("shared", "the zero gradient")),
    errors.OPEN_RANGE: (_open_range, ("counter", "body load in y", "body load as x", "outer",
                                      "body load through a detach",
                                      "counter through an i32")),
    errors.NO_RULE: (_no_rule, ("reduce op=mul", "reduce op=mul axis=", "call",
                                "store and load", "element store", "store in a loop",
                                "two stores and loads", *CALL_BODIES)),
    errors.IN_FUNCTION: (_in_function, ("never called", "called")),
}


def invalid_gradients(*, rules=errors.RULES, max_noise: int = 3) -> st.SearchStrategy[Case]:
    """One program per rejection rule (SPEC.md, "When gradient is rejected"), in disguises: the
    offending node deep in the graph, x reached through a store and a load, a reduce op=mul or
    a call on the path, a loss of shape [1], x an i32, a bool, a buffer or a shared literal, y
    or x depending on the range, a gradient in a function body. Valid noise surrounds it.
    Shrinks towards the first rule, its first disguise, and no noise."""
    return _invalid_gradients(Bounds(rules=rules, max_noise=max_noise))


@st.composite
def _invalid_gradients(draw, b: Bounds) -> Case:
    rules, max_noise = b.rules, b.max_noise
    w = Writer(draw, prune=False)
    rule, kind = w.choose([(r, k) for r in rules for k in DISGUISES[r][1]])
    w.swarm = frozenset({"respelled"}) if w.flip() else frozenset()
    base = w.choose(SHAPES[:2])
    w.input("f32", base)
    _noise(w, base, max_steps=max_noise)
    x = w.pick("f32", base, literal_ok=False)
    y, target, how = DISGUISES[rule][0](w, base, x, kind)
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


def _bitcast_round_trip(w, base, x, other):
    k = w.value("bitcast", [x], "i32", x.shape, attrs="dtype=i32")
    back = w.value("bitcast", [k], "f32", x.shape, attrs="dtype=f32")
    y = w.loss(w.value("mul", [back, other], "f32", x.shape))
    return y, x, "x reached only through a bitcast to i32 and back: zeros"


def _detached_loss(w, base, x, other):
    s = w.loss(w.value("mul", [x, x], "f32", x.shape))
    return w.value("detach", [s], "f32", (), carry=[]), x, "the loss is a detach"


NEAR_MISSES: tuple[Callable, ...] = (_reduce_mul_off_path, _call_off_path, _memory_off_path,
                                     _independent, _gradient_in_loop, _x_without_rule,
                                     _detached_loss, _bitcast_round_trip)


def near_misses(*, max_noise: int = 3) -> st.SearchStrategy[Case]:
    """Valid programs that look invalid, each of which must be accepted: a reduce op=mul, call
    or load off the path, or reachable only through detach or an i32 cast; x a load or a node
    with no rule; y not depending on x; a gradient inside a loop that depends on nothing of
    the loop; a detached loss. Shrinks towards the first kind and no noise."""
    return _near_misses(Bounds(max_noise=max_noise))


@st.composite
def _near_misses(draw, b: Bounds) -> Case:
    max_noise = b.max_noise
    w = Writer(draw, prune=False)
    make = w.choose(NEAR_MISSES)
    w.swarm = frozenset({"respelled"}) if w.flip() else frozenset()
    base = w.choose(SHAPES[:2])
    x = w.input("f32", base)
    other = w.input("f32", base)
    _noise(w, base, max_steps=max_noise)
    y, target, how = make(w, base, x, other)
    if y is not None:
        g = w.gradient(y, target)
        w.store(g)
    return _case(draw, w, mode="anything", kind="near miss", how=f"near miss: {how}")
