"""The gradient rules: one row per op, the only place that knows any op's derivative.

SPEC.md, "The rules". A row is `rule(e, u, g, k)`: the share that node `u`, whose gradient is
`g`, passes to its operand `k`, built as IR nodes through the emitter `e`; None passes nothing.
The walk (gradient.py) calls a row only for an operand that is f32 and depends on x, so no
node is ever built for the others. An op with no row has no rule: the walk rejects it.
The op forms are exactly those of the spec, operand order included: they decide hash consing
and so the bits of every later gradient.
"""

from __future__ import annotations

LN2 = "0.6931472"  # ln 2 rounded to f32
HALF_PI = "1.5707964"  # pi / 2 rounded to f32


def _max(e, u, g, k):
    a, b = u.operands
    larger = e("cmplt", b, a) if k == 0 else e("cmplt", a, b)
    tie = e("where", e("cmpne", a, b), e.f32("0.0"), e("mul", g, e.f32("0.5")))
    return e("where", larger, g, tie)


def _where(e, u, g, k):
    c = u.operands[0]
    return None if k == 0 else e("where", c, g, e.f32("0.0")) if k == 1 else \
        e("where", c, e.f32("0.0"), g)


def _reduce_max(e, u, g, k):
    a = u.operands[0]
    axis, shape = u.attr("axis"), a.shape
    m = e("where", e("cmpne", a, e("expand", u, shape=shape)), e.f32("0.0"), e.f32("1.0"))
    count = e("expand", e("reduce", m, op="add", axis=axis), shape=shape)
    return e("mul", e("mul", m, e("recip", count)), e("expand", g, shape=shape))


def _expand(e, u, g, k):
    a = u.operands[0]
    if not a.shape:
        return e("reduce", g, op="add")
    return e("reduce", g, op="add", axis=tuple(d for d, n in enumerate(a.shape) if n == 1))


RULES = {
    # d(a + b) = da + db
    "add": lambda e, u, g, k: g,
    # d(a b) = b da + a db
    "mul": lambda e, u, g, k: e("mul", g, u.operands[1 - k]),
    # d(1/a) = -(1/a)^2 da
    "recip": lambda e, u, g, k: e("mul", g, e("mul", e("mul", u, u), e.f32("-1.0"))),
    # d max(a, b): all of g to the larger side, g/2 to each side of a tie, 0 with a NaN
    "max": _max,
    # d where(c, a, b) = where(c, da, db); the bool c receives nothing
    "where": _where,
    # d 2^a = 2^a ln2 da
    "exp2": lambda e, u, g, k: e("mul", e("mul", g, u), e.f32(LN2)),
    # d log2(a) = da / (a ln2)
    "log2": lambda e, u, g, k: e("mul", g, e("recip", e("mul", u.operands[0], e.f32(LN2)))),
    # d sqrt(a) = da / (2 sqrt(a))
    "sqrt": lambda e, u, g, k: e("mul", g, e("recip", e("mul", u, e.f32("2.0")))),
    # d sin(a) = cos(a) da = sin(a + pi/2) da
    "sin": lambda e, u, g, k: e("mul", g, e("sin", e("add", u.operands[0], e.f32(HALF_PI)))),
    # an f32 cast or bitcast of an f32 is the identity
    "cast": lambda e, u, g, k: g,
    "bitcast": lambda e, u, g, k: g,
    # detach(a) is a constant
    "detach": lambda e, u, g, k: None,
    # d sum(a) = g at every summed element
    "reduce.add": lambda e, u, g, k: e("expand", g, shape=u.operands[0].shape),
    # d max(a) = g shared equally among the elements equal to the max
    "reduce.max": _reduce_max,
    # d expand(a) = the sum of g over the copies
    "expand": _expand,
    # d reshape(a) = g in a's shape
    "reshape": lambda e, u, g, k: e("reshape", g, shape=u.operands[0].shape),
    # No row, so no rule: call, load (other than x), reduce op=mul, and the rest.
}


def rule_key(node) -> str:
    """The row of `node` in RULES (reduce is one row per op= attribute)."""
    return f"reduce.{node.attr('op')}" if node.op == "reduce" else node.op


# The rows enumerated by value, in groups, for grading by area (docs/grading.md, "The rubric";
# SPEC.md, "The rules"): rules that go wrong together, each group an area "The rules: NAME".
# cast, bitcast and detach pass g as it is or nothing, whatever the values, and are not
# enumerated by value: their tests are their checks' areas (detach's, "Detach").
RULE_GROUPS = {
    "arithmetic": ("add", "mul", "recip"),  # sums and products: g passed on, or times
    "max and where": ("max", "where"),  # a choice: g to the side taken, halves at a tie
    "transcendentals": ("exp2", "log2", "sqrt", "sin"),  # times the derivative, as IR ops
    "reduce and movement": ("reduce.add", "reduce.max", "expand", "reshape"),  # shapes
}


def rule_group(name: str) -> str | None:
    """The group of the RULES row `name` ("reduce-max" as "reduce.max"), or None for a name
    that is no row of a group."""
    row = name.replace("-", ".")
    return next((group for group, rows in RULE_GROUPS.items() if row in rows), None)
