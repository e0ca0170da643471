"""The catalogue of variants: the spec with one choice made otherwise, as implementations
make it. docs/diagnosis.md, "Diagnosis".

Each `Variant` has a short name, one line in the spec's words of what it does instead, the
SPEC.md section it departs from, and a `change`: a function from a Semantics
(reference/semantics.py) to the same Semantics with the variant's choice made. Changes
compose: each touches its own part (a row of the rules, the fold, the domain's form of some
ops), so two variants applied one after the other are both at once.

The catalogue serves twice. Diagnosis (conformance/diagnosis/diagnose.py) reruns the reference
with a variant on a divergent case and names the variants that give exactly what the implementation
gave. And each variant is a faulty implementation that the suite must kill
(`gradient-conformance mutants`; `--impl=variant:NAME` runs the suite against one).

What a variant changes is read off the change itself (`parts`: the spec's Semantics and the
variant's compared), and so is where it can matter (`applies`: a case using an op whose
arithmetic, rule or fold it replaces) and whether two can be tried as a pair (`composable`:
a change that replaces what another already replaced keeps only its own, unless it is
written to wrap what it is given, `composes`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gradient_conformance.reference import errors, exact, gradient, rules
from gradient_conformance.reference.graph import ATTRIBUTE_ORDER, Node, scoped_key
from gradient_conformance.reference.interp import (
    EXACT,
    ExactF32,
    elementwise_table,
    reduced_rows,
)
from gradient_conformance.reference.ops import OPS, REDUCE_OPS, elementwise, feature
from gradient_conformance.reference.semantics import SPEC, Semantics, tape_left_fold
from gradient_conformance.reference.tape import LEAVES as TAPE_LEAVES


@dataclass(frozen=True)
class Variant:
    name: str
    says: str  # what it does instead, in the spec's words
    section: str  # the SPEC.md section it departs from
    change: Callable[[Semantics], Semantics]
    tape: bool = False  # a variant of the tape exercise, not of programs
    # Its change wraps what it is given (a flush around the domain's ops, a rejection rule
    # taken out of those in force) rather than replacing it, so that applied after another
    # variant that changed the same part, both are in effect.
    composes: bool = False
    # The decision of SPEC.md, quoted, that it reads otherwise where the course's text
    # (ir.md, gradient.md) is silent: the course text read otherwise, not a bug
    # (docs/diagnosis.md, "Decisions"). "" for a departure from the text itself.
    decision: str = ""
    # For a decision: the program rewritten so that the decision cannot matter and the
    # spec's meaning is kept (the control program: an implementation whose outcome depends
    # on the decision gives the spec's there). None where no such rewrite is written.
    control: Callable[[str], str] | None = None

    def semantics(self, base: Semantics = SPEC) -> Semantics:
        return self.change(base)


def _each_line(source: str, rewrite: Callable[[list[str]], list[str]]) -> str:
    """The source with the tokens of each line's code rewritten (its indent and its comment
    kept): a control program's text (Variant.control)."""
    lines = []
    for line in source.splitlines():
        code, mark, comment = line.partition("#")
        indent = code[:len(code) - len(code.lstrip())]
        trailing = code[len(code.rstrip()):]
        tokens = code.split()
        lines.append((indent + " ".join(rewrite(tokens)) + trailing if tokens else code) +
                     mark + comment)
    return "\n".join(lines) + "\n"


def _attributes_sorted(tokens: list[str]) -> list[str]:
    """A statement's attributes in one order, by key, after its other tokens."""
    attrs = [t for t in tokens if "=" in t and t != "=" and not t.startswith("=")]
    return [t for t in tokens if t not in attrs] + sorted(attrs, key=lambda t: t.split("=")[0])


def _axes_sorted(tokens: list[str]) -> list[str]:
    """An axis= list's axes in increasing order."""
    def sort(token: str) -> str:
        inside = token[len("axis=["):-1]
        if not token.startswith("axis=[") or not token.endswith("]") or not inside:
            return token
        try:
            return "axis=[" + ",".join(str(a) for a in sorted(int(n) for n in
                                                               inside.split(","))) + "]"
        except ValueError:
            return token
    return [sort(t) for t in tokens]


def _set(**fields) -> Callable[[Semantics], Semantics]:
    return lambda s: dataclasses.replace(s, **fields)


def _row(key: str, row: Callable) -> Callable[[Semantics], Semantics]:
    """Write one row of the rules table otherwise."""
    return lambda s: dataclasses.replace(s, rules={**s.rules, key: row})


def _ops(name: str, **methods) -> Callable[[Semantics], Semantics]:
    """Compute some ops otherwise: a subclass of the semantics' domain with these methods
    (staticmethods of bit patterns, as ExactF32's), and these `overrides` (op, dtype) ->
    function and `arrays` (op -> function of the node and its operands' arrays) added to
    any it has. `wraps`: method -> a function of the domain's own method giving the new one,
    for a variant that changes some operands only and leaves the rest to whatever the
    domain already does (so that it composes)."""
    overrides, arrays = methods.pop("overrides", {}), methods.pop("arrays", {})
    wraps = methods.pop("wraps", {})

    def change(s: Semantics) -> Semantics:
        base = s.domain
        body: dict[str, object] = {k: staticmethod(f) for k, f in methods.items()}
        body.update({k: staticmethod(w(getattr(base, k))) for k, w in wraps.items()})
        body["overrides"] = {**getattr(base, "overrides", {}), **overrides}
        body["arrays"] = {**getattr(base, "arrays", {}), **arrays}
        if "fold_row" in methods:
            body["fold_row"] = staticmethod(methods["fold_row"])
        domain = type(f"{type(base).__name__}_{name}", (type(base),), body)()
        return dataclasses.replace(s, domain=domain)
    return change


def _then(*changes) -> Callable[[Semantics], Semantics]:
    def change(s: Semantics) -> Semantics:
        for c in changes:
            s = c(s)
        return s
    return change


# --- the walk and the fold (SPEC.md, "The walk") --------------------------------------------


def _by_sender(reverse: bool):
    def fold(e, shares, senders):
        order = sorted(range(len(shares)), reverse=reverse,
                       key=lambda k: -1 if senders[k] is None else senders[k].id)
        return gradient.left_fold(e, [shares[k] for k in order])
    return fold


def _pairwise(e, shares, senders):
    """Adjacent pairs summed, then pairs of those, an odd one carried along."""
    while len(shares) > 1:
        shares = [e("add", shares[k], shares[k + 1]) if k + 1 < len(shares) else shares[k]
                  for k in range(0, len(shares), 2)]
    return shares[0]


def _blocked(add: Callable, shares: list):
    """Under 8 shares a left fold; from 8 on, numpy's pairwise_sum: 8 running sums,
    ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest one by one. `add`
    sums two shares (nodes of a program, or a tape's values)."""
    n = len(shares)
    if n < 8:
        return functools.reduce(add, shares)  # a left fold
    r = list(shares[:8])
    i = 8
    while i < n - n % 8:
        r = [add(r[j], shares[i + j]) for j in range(8)]
        i += 8
    total = add(add(add(r[0], r[1]), add(r[2], r[3])), add(add(r[4], r[5]), add(r[6], r[7])))
    for share in shares[i:]:
        total = add(total, share)
    return total


def _blocked_fold(e, shares, senders):
    """_blocked over a program's share nodes."""
    return _blocked(lambda a, b: e("add", a, b), shares)


def _post_order(operands_of) -> Callable:
    """The walk's post-order, descending to `operands_of(node)` instead of every operand."""
    return lambda root: gradient.post_order(root, operands_of)


WALK = [
    Variant("program-order", "sums a node's shares in the order their senders stand in the "
            "program, not as they arrived", "The walk", _set(fold=_by_sender(False))),
    Variant("reversed-arrival", "sums a node's shares in the reverse of their arrival order",
            "The walk", _set(fold=lambda e, shares, senders: gradient.left_fold(e, shares[::-1]))),
    Variant("reversed-program-order", "sums a node's shares by sender, the last one in the "
            "program first", "The walk", _set(fold=_by_sender(True))),
    Variant("pairwise", "sums a node's shares pairwise, (s1 + s2) + (s3 + s4)", "The walk",
            _set(fold=_pairwise)),
    Variant("creation-order", "sums a node's shares in the order the share nodes were made "
            "(a tape's order)", "The walk", _set(fold=lambda e, shares, senders: gradient.
                                                 left_fold(e, sorted(shares,
                                                                     key=lambda n: n.id)))),
    Variant("blocked-past-eight", "sums a node's shares left to right when fewer than 8, "
            "else in 8 running sums combined pairwise, as numpy sums 8 or more values",
            "The walk", _set(fold=_blocked_fold)),
    Variant("fold-from-zero", "starts each sum of shares from 0.0", "The walk",
            _set(fold=lambda e, shares, senders: gradient.left_fold(e, [e.f32("0.0"),
                                                                         *shares]))),
    Variant("operands-right-to-left", "takes the post-order with operands right to left",
            "The walk", _set(post_order=_post_order(lambda n: n.operands[::-1]))),
    Variant("not-through-detach", "takes the post-order without descending through detach",
            "The walk", _set(post_order=_post_order(
                lambda n: () if n.op == "detach" else n.operands))),
]


# --- hash consing (SPEC.md, "Hash consing") -------------------------------------------------


def _kept_apart(op, operands, scope):
    """Every node made in a range body is in the body's scope, a pure one too: the project's
    reading before ir.md said otherwise in so many words."""
    return scope


def _signed_zero_literals_merged(op, dtype, shape, operands, attrs, scope, tag, origin):
    """The literals 0.0 and -0.0 are one node (as a table keyed on float value makes them:
    -0.0 == 0.0), the first one made."""
    if op == "const" and dtype == "f32" and dict(attrs).get("value") == exact.NEG_ZERO:
        attrs = (("value", exact.POS_ZERO),)
    return scoped_key(op, dtype, shape, operands, attrs, scope, tag, origin)


def _attributes_in_written_order(op, dtype, shape, operands, attrs, scope, tag, origin):
    """Attributes keyed as a sequence, in the order written (a rule writes a reduce's as
    `op=`, then `axis=`), where the spec keys them as a set."""
    return (*scoped_key(op, dtype, shape, operands, attrs, scope, tag, origin), tuple(attrs))


def _where_folded(key: Callable) -> Callable:
    """A key under which `where` of a literal condition is the operand it selects (when of
    the same shape): constant folding at build time, which makes the two one node."""
    def folded(op, dtype, shape, operands, attrs, scope, tag, origin):
        if op == "where" and operands[0].is_literal:
            chosen = operands[1] if operands[0].attr("value") else operands[2]
            if chosen.shape == shape and not chosen.is_literal:
                return key(chosen.op, chosen.dtype, chosen.shape, chosen.operands,
                           chosen.attrs, chosen.scope, chosen.tag, 0)
        return key(op, dtype, shape, operands, attrs, scope, tag, origin)
    return folded


INTERNING = [
    Variant("no-hash-consing", "makes every statement a node of its own: equal nodes are not "
            "one", "Hash consing", _set(key=lambda *fields: object())),
    Variant("scopes-kept-apart", "keeps every node of a range body apart from an equal one "
            "outside it, a pure one too", "Hash consing", _set(scope_of=_kept_apart)),
    Variant("signed-zero-literals-merged", "makes the literals 0.0 and -0.0 one node, the "
            "first one written", "Hash consing", _set(key=_signed_zero_literals_merged)),
    Variant("gradient-nodes-apart", "keeps the nodes a gradient builds apart from the "
            "program's equal nodes", "Hash consing",
            _set(key=lambda *f: (*scoped_key(*f), f[-1]))),
    Variant("attributes-in-written-order", "keys a node on its attributes in the order they "
            "are written, so `reduce %x op=add axis=[0]` and `reduce %x axis=[0] op=add` are "
            "two nodes (SPEC.md decides they are one)", "Operations",
            _set(key=_attributes_in_written_order),
            decision="**Decision (attribute-order):** attributes are stored in one canonical "
                     "order, so `op=add axis=[0]` and `axis=[0] op=add` are the same node.",
            control=lambda source: _each_line(source, _attributes_sorted)),
    Variant("where-literal-folded", "folds a where whose condition is a literal into the "
            "value it selects: the two are one node", "Hash consing",
            lambda s: dataclasses.replace(s, key=_where_folded(s.key)), composes=True),
]


# --- rule forms (SPEC.md, "The rules") ------------------------------------------------------


def _helper(e, op: str, *operands, **attrs):
    """A node of an op the IR does not have (div, cos, first_max): f32, of its operands'
    shape, computed by the domain (HELPERS)."""
    shapes = {o.shape for o in operands if not o.is_literal}
    return e.graph.node(op, operands, tuple(attrs.items()), scope=e.scope, line=e.line,
                        origin=e.line, dtype="f32", shape=shapes.pop() if shapes else ())


def _first_max(node, args):
    """1.0 at the first element of each reduced row equal to that row's max (args: a, and
    the max expanded to a's shape), 0.0 elsewhere; none for a row whose max is NaN."""
    a, m = (np.broadcast_to(v, node.shape) for v in args)
    axes = dict(node.attrs).get("axis")
    axes = tuple(range(a.ndim)) if axes is None else axes
    kept = [k for k in range(a.ndim) if k not in axes]
    order = kept + list(axes)
    rows = int(np.prod([a.shape[k] for k in kept]))
    flat_a = np.transpose(a, order).reshape(rows, -1)
    flat_m = np.transpose(m, order).reshape(rows, -1)
    out = np.full(flat_a.shape, exact.POS_ZERO, dtype=object)
    for r in range(rows):
        for k in range(flat_a.shape[1]):
            if not exact.f32_ne(flat_a[r, k], flat_m[r, k]):
                out[r, k] = exact.ONE
                break
    shape = [a.shape[k] for k in order]
    return np.transpose(out.reshape(shape), np.argsort(order))


HELPERS = _ops("helpers", overrides={("div", "f32"): exact.f32_div,
                                     ("cos", "f32"): exact.f32_cos},
               arrays={"first_max": _first_max})


def _recip_neg_div(e, u, g, k):
    a = u.operands[0]  # -(g / (a a))
    return e("mul", _helper(e, "div", g, e("mul", a, a)), e.f32("-1.0"))


def _recip_neg_first(e, u, g, k):
    return e("mul", e("mul", e("mul", g, e.f32("-1.0")), u), u)  # ((-g) u) u


def _recip_form(e, u, g, k):
    a = u.operands[0]  # (-g) (1 / (a a))
    return e("mul", e("mul", g, e.f32("-1.0")), e("recip", e("mul", a, a)))


def _sqrt_div(e, u, g, k):
    return _helper(e, "div", g, e("mul", u, e.f32("2.0")))  # g / (2u)


def _sqrt_half_div(e, u, g, k):
    return _helper(e, "div", e("mul", g, e.f32("0.5")), u)  # (g / 2) / u


def _exp2_product(e, u, g, k):
    return e("mul", g, e("mul", u, e.f32(rules.LN2)))  # g (2^a ln2)


def _log2_div(e, u, g, k):
    return _helper(e, "div", g, e("mul", u.operands[0], e.f32(rules.LN2)))  # g / (a ln2)


def _sin_cos(e, u, g, k):
    return e("mul", g, _helper(e, "cos", u.operands[0]))  # g cos(a)


def _sin_reflected(e, u, g, k):
    minus_a = e("mul", u.operands[0], e.f32("-1.0"))  # g sin(pi/2 - a)
    return e("mul", g, e("sin", e("add", e.f32(rules.HALF_PI), minus_a)))


def _max_tie_first(e, u, g, k):
    b_larger = e("cmplt", *u.operands)  # a < b; at a tie, or with a NaN, a takes all of g
    return e("where", b_larger, e.f32("0.0"), g) if k == 0 else \
        e("where", b_larger, g, e.f32("0.0"))


def _max_tie_both(e, u, g, k):
    a, b = u.operands  # all of g to the larger side, and to each side of a tie
    larger = e("cmplt", b, a) if k == 0 else e("cmplt", a, b)
    return e("where", larger, g, e("where", e("cmpne", a, b), e.f32("0.0"), g))


def _reduce_max_all(e, u, g, k):
    a = u.operands[0]  # g at every element equal to the max, undivided
    m = e("where", e("cmpne", a, e("expand", u, shape=a.shape)), e.f32("0.0"), e.f32("1.0"))
    return e("mul", m, e("expand", g, shape=a.shape))


def _reduce_max_first(e, u, g, k):
    a = u.operands[0]  # g at the first element equal to the max
    axis = {"axis": u.attr("axis")} if u.attr("axis") is not None else {}
    first = _helper(e, "first_max", a, e("expand", u, shape=a.shape), **axis)
    return e("mul", first, e("expand", g, shape=a.shape))


def _where_both(e, u, g, k):
    return None if k == 0 else g  # g to a and to b; the bool c nothing


def _detach_passes(e, u, g, k):
    return g  # detach(a) as a


def _flows_detach(node, operand):
    return gradient.flows(node, operand) or (
        node.op == "detach" and node.dtype == "f32" and operand.dtype == "f32")


def _is_i32_cast_of_f32(node) -> bool:
    return node.op == "cast" and node.dtype == "i32" and node.operands[0].dtype == "f32"


def _flows_i32_cast(node, operand):
    """An f32 -> i32 cast carries its operand's gradient, and so does the cast back."""
    if node.op == "detach" or operand.op == "buffer":
        return False
    carrier = node.dtype == "f32" or _is_i32_cast_of_f32(node)
    return carrier and (operand.dtype == "f32" or _is_i32_cast_of_f32(operand))


def _max_literal_step(e, u, g, k):
    """max with a literal operand differentiated as relu: all of g where the value is the
    larger, nothing at a tie (or a NaN); max of two values as the spec."""
    a, b = u.operands
    if not (a.is_literal or b.is_literal):
        return rules.RULES["max"](e, u, g, k)
    value, other = (a, b) if k == 0 else (b, a)
    return e("where", e("cmplt", other, value), g, e.f32("0.0"))


def _expand_axis_by_axis(e, u, g, k):
    """expand's share summed over one expanded axis at a time, the last first (a sum to
    the operand's shape written as a loop over axes)."""
    a = u.operands[0]
    axes = [d for d, n in enumerate(u.shape) if not a.shape or a.shape[d] == 1]
    if len(axes) < 2:
        return rules.RULES["expand"](e, u, g, k)
    for d in reversed(axes):
        g = e("reduce", g, op="add", axis=(d,))
    return e("reshape", g, shape=()) if not a.shape else g


def _each_rule(wrap) -> Callable[[Semantics], Semantics]:
    """Every row of the semantics' rules, wrapped: `wrap(row)` is the new row."""
    return lambda s: dataclasses.replace(s, rules={key: wrap(row) for key, row in
                                                   s.rules.items()})


def _once_per_operand(row):
    def once(e, u, g, k):
        if not isinstance(u, Node):
            return row(e, u, g, k)  # a tape's entry: tape-same-operand-once is its own
        if k > 0 and any(u.operands[j] is u.operands[k] for j in range(k)):
            return None  # the operand already had its share
        return row(e, u, g, k)
    return once


def _flushed_share(row):
    def flushed(e, u, g, k):
        share = row(e, u, g, k)
        if share is None or not isinstance(u, Node):
            return share  # a program's rules only: a tape's shares are no nodes
        return _helper(e, "flush", share)
    return flushed


# The flush node of `rules-flush-subnormals`: its value the flushed operand, its share g, so
# that a gradient of a gradient still goes through it.
FLUSH = _then(_ops("flush", overrides={("flush", "f32"): exact.flush}),
              lambda s: dataclasses.replace(s, rules={**s.rules,
                                                      "flush": lambda e, u, g, k: g}))


def _one_hop(depends_on):
    """depends_on, following memory one store deep: a stored value that is itself a load of
    what a store wrote is not followed."""
    def one_hop(y, x, stored_values, flows):
        def first_hop(load):
            return [v for v in stored_values(load) if not (v.op == "load" and
                                                          list(stored_values(v)))]
        return depends_on(y, x, first_hop, flows)
    return one_hop


def _flows_bitcast_round_trip(flows):
    """A bitcast f32 -> i32 carries its operand's gradient, and so does the bitcast back."""
    def flows_through(node, operand):
        if node.op == "bitcast" and operand.dtype == "f32" and node.dtype == "i32":
            return True
        if node.op == "bitcast" and node.dtype == "f32" and operand.op == "bitcast" and \
                operand.operands[0].dtype == "f32":
            return True
        return flows(node, operand)
    return flows_through


def _rule_form(name, says, key, row, *, helpers=False):
    change = _row(key, row)
    return Variant(name, says, "The rules", _then(HELPERS, change) if helpers else change)


RULE_FORMS = [
    _rule_form("recip-neg-div", "writes recip's share -(g / (a * a)), one division", "recip",
               _recip_neg_div, helpers=True),
    _rule_form("recip-neg-first", "writes recip's share ((g * -1.0) * u) * u", "recip",
               _recip_neg_first),
    _rule_form("recip-form", "writes recip's share (g * -1.0) * recip(a * a)", "recip",
               _recip_form),
    _rule_form("sqrt-div", "writes sqrt's share g / (2u), one division", "sqrt", _sqrt_div,
               helpers=True),
    _rule_form("sqrt-half-div", "writes sqrt's share (g * 0.5) / u", "sqrt", _sqrt_half_div,
               helpers=True),
    _rule_form("exp2-product", "writes exp2's share g * (u * ln2)", "exp2", _exp2_product),
    _rule_form("log2-div", "writes log2's share g / (a * ln2), one division", "log2",
               _log2_div, helpers=True),
    _rule_form("sin-cos", "writes sin's share g * cos(a), with cos correctly rounded", "sin",
               _sin_cos, helpers=True),
    _rule_form("sin-reflected", "writes sin's share g * sin(pi/2 - a)", "sin", _sin_reflected),
    _rule_form("max-tie-first", "sends all of g to max's first operand at a tie or a NaN",
               "max", _max_tie_first),
    _rule_form("max-tie-both", "sends all of g to each side of a max tie", "max",
               _max_tie_both),
    _rule_form("reduce-max-all", "sends all of g to every maximum of a reduce op=max",
               "reduce.max", _reduce_max_all),
    _rule_form("reduce-max-first", "sends g to the first maximum of a reduce op=max only",
               "reduce.max", _reduce_max_first, helpers=True),
    _rule_form("where-both", "sends g to both values of a where", "where", _where_both),
    _rule_form("max-literal-step", "differentiates max with a literal operand as relu: all "
               "of g to the larger side, nothing at a tie", "max", _max_literal_step),
    _rule_form("expand-axis-by-axis", "sums expand's share over each expanded axis in "
               "turn, the last first", "expand", _expand_axis_by_axis),
    Variant("same-operand-once", "passes one share, not two, to an operand a node uses "
            "twice (mul a a)", "The rules", _each_rule(_once_per_operand)),
    Variant("rules-flush-subnormals", "flushes every subnormal share a rule passes to zero "
            "(FTZ in the backward pass only)", "The rules",
            _then(_each_rule(_flushed_share), FLUSH), composes=True),
    Variant("detach-passes", "lets the gradient through detach", "The rules",
            _then(_row("detach", _detach_passes), _set(flows=_flows_detach))),
    Variant("i32-cast-passes", "lets the gradient through a cast to i32 and back", "The rules",
            _set(flows=_flows_i32_cast)),
    Variant("bitcast-round-trip-passes", "lets the gradient through a bitcast to i32 and "
            "back", "The rules",
            lambda s: dataclasses.replace(s, flows=_flows_bitcast_round_trip(s.flows)),
            composes=True),
]


# --- forward semantics (SPEC.md, "Values and arithmetic") -----------------------------------

# The f32 domain's methods (ops.py, `Op.evaluate`): those giving an f32, which a flush of
# results (FTZ) applies to, and all of them, which a flush of operands (DAZ) applies to, with
# the conversion of an f32 to bool.
# The domain's methods of the elementwise f32 ops (every one is computed: `elementwise`).
F32_RESULTS: tuple[str, ...] = tuple(str(OPS[op].computed("f32")) for op in
                                     elementwise("f32", 1) + elementwise("f32", 2))
F32_OPERANDS = (*F32_RESULTS, *(str(OPS[op].computed("f32"))
                                for op in elementwise("f32", 2, result="bool")), "to_bool")


def _flushing(name: str, ops: tuple[str, ...], *, inputs: bool):
    """Flush subnormals around the ops of whatever domain the semantics has (so that a
    flush composes with a variant that computes an op otherwise, applied before it): the
    results (FTZ), or the operands (DAZ)."""
    def change(s: Semantics) -> Semantics:
        def wrapped(f):
            if inputs:
                return staticmethod(lambda *a: f(*map(exact.flush, a)))
            return staticmethod(lambda *a: exact.flush(f(*a)))
        base = s.domain
        body = {op: wrapped(getattr(base, op)) for op in ops}
        domain = type(f"{type(base).__name__}_{name}", (type(base),), body)()
        return dataclasses.replace(s, domain=domain)
    return change


def _flushed_results():
    return _flushing("ftz", F32_RESULTS, inputs=False)


def _flushed_inputs():
    return _flushing("daz", F32_OPERANDS, inputs=True)


def _max_on_zeros(first: bool):
    """max, but of two zeros of either sign the first (or second) operand; any other pair
    as the domain's own max gives it."""
    def wrap(base):
        return lambda a, b: (a if first else b) if (a | b) & 0x7FFFFFFF == 0 else base(a, b)
    return wrap


def _sum_in_binary64(values: list) -> int:
    """A row of f32 summed left to right in binary64, rounded to f32 once at the end."""
    total = exact.decode(values[0])
    for v in values[1:]:
        total += exact.decode(v)
    return exact.f32_from_float(total)


ONE = exact.f32_from_text("1.0")


def _mul_rewriting_recip(node, args):
    """mul, but recip(a) * a and a * recip(a) are 1.0: the algebraic rewrite a simplifier
    makes (which the spec does not: at 0 and at infinity the product is NaN)."""
    a, b = node.operands
    if node.dtype == "f32" and ((a.op == "recip" and a.operands[0] is b) or
                                (b.op == "recip" and b.operands[0] is a)):
        return np.full(node.shape, ONE, dtype=object)
    multiply = elementwise_table(EXACT)[("mul", node.dtype)]
    left, right = (np.broadcast_to(v, node.shape) for v in args)
    out = np.empty(node.shape, dtype=object)
    for index in np.ndindex(node.shape):
        out[index] = multiply(left[index], right[index])
    return out


def _max_ignoring_nan(base):
    """max, but the other operand when one is NaN; any other pair as the domain's max."""
    return lambda a, b: b if exact.is_nan(a) else a if exact.is_nan(b) else base(a, b)


def _numpy_pairwise(values: list) -> int:
    """numpy's pairwise summation of f32 (its pairwise_sum): under 8 values a loop from
    -0.0; up to 128, eight accumulators, combined ((r0 + r1) + (r2 + r3)) + ((r4 + r5) +
    (r6 + r7)), then the rest one by one; beyond, the two halves (cut at a multiple of 8)."""
    add, n = exact.f32_add, len(values)
    if n < 8:
        total = exact.NEG_ZERO
        for v in values:
            total = add(total, v)
        return total
    if n <= 128:
        r = list(values[:8])
        i = 8
        while i < n - n % 8:
            r = [add(r[j], values[i + j]) for j in range(8)]
            i += 8
        total = add(add(add(r[0], r[1]), add(r[2], r[3])), add(add(r[4], r[5]),
                                                               add(r[6], r[7])))
        for v in values[i:]:
            total = add(total, v)
        return total
    half = n // 2
    half -= half % 8
    return add(_numpy_pairwise(values[:half]), _numpy_pairwise(values[half:]))


def numpy_sum_row(values: list) -> int:
    """How numpy (2.x) reduces a row of f32 by add: its identity +0.0 plus the pairwise sum
    of the row, so a row of -0.0 sums to +0.0 (tests/test_diagnosis.py holds it to the numpy
    installed)."""
    return exact.f32_add(exact.POS_ZERO, _numpy_pairwise(values))


def _tree_sum_row(values: list) -> int:
    while len(values) > 1:
        values = [exact.f32_add(values[k], values[k + 1]) if k + 1 < len(values) else
                  values[k] for k in range(0, len(values), 2)]
    return values[0]


def _fold_add_rows(sum_row):
    """A fold_row that sums f32 rows with `sum_row`, and folds everything else left."""
    from gradient_conformance.reference.interp import fold_row

    def fold(op, step, row):
        return sum_row(row) if op == "add.f32" else fold_row(op, step, row)
    return fold


def _in_binary64(function):
    def op(a):
        with np.errstate(all="ignore"):
            return exact.f32_from_float(float(function(np.float64(exact.decode(a)))))
    return op


def _binary_by_element(node, args, function):
    left, right = (np.broadcast_to(v, node.shape) for v in args)
    out = np.empty(node.shape, dtype=object)
    for index in np.ndindex(node.shape):
        out[index] = function(left[index], right[index])
    return out


def _literal_bits(node) -> int | None:
    return node.attr("value") if node.is_literal and node.dtype == "f32" else None


def _add_folding_zero(node, args):
    """add, but add a 0.0 is a (the fold a simplifier makes: wrong at a = -0.0, where the
    sum is +0.0)."""
    add = elementwise_table(EXACT)[("add", node.dtype)]
    for k, other in ((0, 1), (1, 0)):
        if node.dtype == "f32" and _literal_bits(node.operands[k]) == exact.POS_ZERO and \
                not node.operands[other].is_literal:
            return np.array(np.broadcast_to(args[other], node.shape), dtype=object)
    return _binary_by_element(node, args, add)


def _max_zero_as_relu(node, args):
    """max, but max a 0.0 is `a > 0 ? a : 0.0` (relu): 0.0 for a NaN a."""
    largest = elementwise_table(EXACT)[("max", node.dtype)]
    for k in (0, 1):
        if node.dtype == "f32" and _literal_bits(node.operands[k]) == exact.POS_ZERO:
            relu = (lambda a, z: a if exact.f32_lt(exact.POS_ZERO, a) else z) if k == 1 \
                else (lambda z, a: a if exact.f32_lt(exact.POS_ZERO, a) else z)
            return _binary_by_element(node, args, relu)
    return _binary_by_element(node, args, largest)


def _reduce_by(node, a, rows_of) -> np.ndarray:
    """reduce, with the rows of reduced elements that `rows_of(a, axes)` gives (kept
    elements in row-major order, each row folded left from its first element)."""
    op, axes = node.attr("op"), node.attr("axis")
    axes = tuple(range(a.ndim)) if axes is None else axes
    step = elementwise_table(EXACT)[(op, node.operands[0].dtype)]
    rows = rows_of(np.asarray(a), axes)
    out = np.empty(rows.shape[0], dtype=object)
    for r, row in enumerate(rows):
        out[r] = exact_fold(step, list(row)) if len(row) else _EMPTY[op, node.dtype]
    return out.reshape(node.shape)


# The value of an empty reduction (SPEC.md, "Values and arithmetic").
_EMPTY = {("add", "f32"): exact.POS_ZERO, ("max", "f32"): exact.NEG_INF,
          ("mul", "f32"): exact.ONE, ("add", "i32"): 0, ("max", "i32"): exact.I32_MIN,
          ("mul", "i32"): 1}


def exact_fold(step, row: list):
    total = row[0]
    for v in row[1:]:
        total = step(total, v)
    return total


def _reduce_axis_by_axis(node, args):
    """reduce over several axes as one reduce per axis, the last first, each rounded."""
    a = np.asarray(args[0])
    axes = node.attr("axis")
    if axes is None or len(axes) < 2 or any(a.shape[k] == 0 for k in axes):
        return _reduce_by(node, a, reduced_rows)
    step = elementwise_table(EXACT)[(node.attr("op"), node.operands[0].dtype)]
    for k in sorted(axes, reverse=True):
        moved = np.moveaxis(a, k, -1)
        out = np.empty(moved.shape[:-1], dtype=object)
        for index in np.ndindex(out.shape):
            out[index] = exact_fold(step, list(moved[index]))
        a = np.expand_dims(out, k)
    return a.reshape(node.shape)


def _middle_axis_as_reshape(a, axes):
    """The rows of a reduce over one middle axis read as a reshape would lay them out,
    not a transpose: the index map of a kernel that forgot the strides of the axes after
    the reduced one."""
    if len(axes) == 1 and 0 < axes[0] < a.ndim - 1:
        k = axes[0]
        shape = [d for j, d in enumerate(a.shape) if j != k] + [a.shape[k]]
        return np.asarray(a).reshape(shape).reshape(-1, a.shape[k])
    return reduced_rows(a, axes)


def _reduce_mul_reversed(node, args):
    """reduce op=mul with axis=: each row folded from its last element."""
    a = np.asarray(args[0])
    if node.attr("op") != "mul" or node.attr("axis") is None:
        return _reduce_by(node, a, reduced_rows)
    return _reduce_by(node, a, lambda a, axes: reduced_rows(a, axes)[:, ::-1])


def _idiv_floor(a, b):
    return 0 if b == 0 else exact.wrap(a // b)


def _mod_divisor_sign(a, b):
    return 0 if b == 0 else exact.wrap(a % b)


FORWARD = [
    Variant("flush-results", "flushes every subnormal f32 result of arithmetic (and max) to "
            "zero (FTZ)",
            "Values and arithmetic", _flushed_results(), composes=True),
    Variant("flush-inputs", "reads subnormal f32 operands as zero (DAZ)",
            "Values and arithmetic", _flushed_inputs(), composes=True),
    Variant("max-first-on-zeros", "gives max's first operand for max(-0.0, +0.0) and "
            "max(+0.0, -0.0)", "Values and arithmetic",
            _ops("max0", wraps={"max": _max_on_zeros(True)}), composes=True),
    Variant("max-second-on-zeros", "gives max's second operand for max(-0.0, +0.0) and "
            "max(+0.0, -0.0)", "Values and arithmetic",
            _ops("max0b", wraps={"max": _max_on_zeros(False)}), composes=True),
    Variant("sums-in-binary64", "sums reduce op=add of f32 in binary64, rounding once at "
            "the end", "Values and arithmetic",
            _ops("sum64", fold_row=_fold_add_rows(_sum_in_binary64))),
    Variant("recip-times-x-is-one", "rewrites recip(a) * a to 1.0 (an algebraic "
            "simplification)", "Values and arithmetic",
            _ops("simplified", arrays={"mul": _mul_rewriting_recip})),
    Variant("max-ignores-nan", "gives max's other operand when one is NaN (fmax)",
            "Values and arithmetic", _ops("fmax", wraps={"max": _max_ignoring_nan}),
            composes=True),
    Variant("numpy-sum", "sums reduce op=add of f32 as numpy does (pairwise, from +0.0)",
            "Values and arithmetic", _ops("npsum", fold_row=_fold_add_rows(numpy_sum_row))),
    Variant("pairwise-reduce", "sums reduce op=add of f32 as a tree of adjacent pairs",
            "Values and arithmetic", _ops("tree", fold_row=_fold_add_rows(_tree_sum_row))),
    Variant("add-zero-folded", "folds add a 0.0 to a (wrong at a = -0.0, where the sum is "
            "+0.0)", "Values and arithmetic", _ops("add0", arrays={"add": _add_folding_zero})),
    Variant("max-zero-relu", "computes max a 0.0 as relu, a > 0 ? a : 0.0 (0.0 for a NaN "
            "a)", "Values and arithmetic", _ops("relu", arrays={"max": _max_zero_as_relu})),
    Variant("reduce-axis-by-axis", "reduces several axes one at a time, the last first, "
            "each step rounded", "Values and arithmetic",
            _ops("axes", arrays={"reduce": _reduce_axis_by_axis})),
    Variant("reduce-middle-axis-reshaped", "reads a reduce over a middle axis with a "
            "reshape's index map, not a transpose's", "Values and arithmetic",
            _ops("strides", arrays={"reduce": lambda node, args: _reduce_by(
                node, args[0], _middle_axis_as_reshape)})),
    Variant("reduce-mul-axis-reversed", "folds each row of a reduce op=mul with axis= from "
            "its last element", "Values and arithmetic",
            _ops("mulrev", arrays={"reduce": _reduce_mul_reversed})),
    Variant("transcendentals-in-binary64", "computes exp2, log2 and sin in binary64, then "
            "rounds to f32", "Values and arithmetic",
            _ops("f64", exp2=_in_binary64(np.exp2), log2=_in_binary64(np.log2),
                 sin=_in_binary64(np.sin))),
    Variant("idiv-floors", "rounds idiv down, not toward zero", "Values and arithmetic",
            _ops("floor", overrides={("idiv", "i32"): _idiv_floor})),
    Variant("mod-divisor-sign", "gives mod the sign of the divisor", "Values and arithmetic",
            _ops("pymod", overrides={("mod", "i32"): _mod_divisor_sign})),
    Variant("literals-through-binary64", "rounds a decimal literal to binary64 first, then "
            "to f32", "Text form", _set(literal=lambda text: exact.f32_from_text(text)
                                        if text in ("inf", "-inf", "nan") else
                                        exact.f32_from_float(float(text)))),
]


# --- rejections (SPEC.md, "When gradient is rejected") --------------------------------------

WITHOUT = {
    errors.LOSS_NOT_F32_SCALAR: "accepts a loss that is no f32 scalar (a non-scalar loss "
                                "is summed implicitly)",
    errors.X_NOT_F32: "accepts an x that is a buffer, an i32 or a bool",
    errors.X_LITERAL: "accepts a literal x",
    errors.OPEN_RANGE: "accepts a loss or x that depends on the range the gradient is in",
    errors.NO_RULE: "passes nothing through a node without a rule, rejecting nothing",
    errors.IN_FUNCTION: "accepts a gradient in a function body",
}


def _loss_not_f32(y, x, stored_values):
    return "the loss is not an f32 value" if y.op == "buffer" or y.dtype != "f32" else None


def _independent_loss(y, x, stored_values):
    carries = gradient.depends_on(y, x, stored_values, gradient.flows)
    return None if x in carries else "the loss does not depend on x"


def _through_detach_or_cast(y, x, stored_values):
    for node in gradient.reachable(y):
        crossing = node.op == "detach" or (node.op in ("cast", "bitcast", "cmplt", "cmpne")
                                           and node.dtype != "f32")
        if crossing and x in gradient.reachable(node) and node is not x:
            return f"x is reached through a {node.op}"
    return None


LEAVES = ("const", "buffer", "param", "range")


def _no_rule_anywhere(y, x, stored_values):
    for node in gradient.reachable(y):
        if node is x or node.op in LEAVES or rules.rule_key(node) in rules.RULES:
            continue
        if node.op == "load" and not list(stored_values(node)):
            continue  # an input: a leaf of the program
        return f"the loss's graph holds a {rules.rule_key(node)}, which has no rule"
    return None


REJECTIONS = [
    Variant(f"without-{rule}", says, "When gradient is rejected",
            (lambda r: lambda s: dataclasses.replace(s, rejections=s.rejections - {r}))(rule),
            composes=True)
    for rule, says in WITHOUT.items()
] + [
    Variant("reduce-mul-as-add", "differentiates reduce op=mul as if it were op=add",
            "When gradient is rejected", _row("reduce.mul", rules.RULES["reduce.add"])),
    Variant("memory-one-hop", "follows dependence through memory one store deep: x stored, "
            "loaded and stored again is not seen", "When gradient is rejected",
            lambda s: dataclasses.replace(s, depends_on=_one_hop(s.depends_on)),
            composes=True),
    Variant("open-range-not-through-detach", "decides whether y or x depends on an open "
            "range without descending through detach", "When gradient is rejected",
            _set(range_inputs=lambda n: () if n.op == "detach" else n.operands)),
    # The rule's two conditions apart: a framework may sum a non-scalar loss and still
    # refuse one that is not f32 (TensorFlow's GradientTape.gradient sums the target).
    Variant("nonscalar-loss-summed", "accepts an f32 loss that is not a scalar, summing it "
            "implicitly, and still rejects a loss that is not f32", "When gradient is rejected",
            lambda s: dataclasses.replace(
                s, rejections=s.rejections - {errors.LOSS_NOT_F32_SCALAR},
                more_rejections=(*s.more_rejections, _loss_not_f32)),
            composes=True),
    Variant("rejects-independent-loss", "rejects a gradient whose loss does not depend on x",
            "When gradient is rejected",
            lambda s: dataclasses.replace(s, more_rejections=(*s.more_rejections,
                                                              _independent_loss)),
            composes=True),
    Variant("rejects-through-detach-or-cast", "rejects a gradient whose loss reaches x "
            "through a detach or a cast to i32 or bool", "When gradient is rejected",
            lambda s: dataclasses.replace(s, more_rejections=(*s.more_rejections,
                                                              _through_detach_or_cast)),
            composes=True),
    Variant("rejects-any-no-rule-node", "rejects a gradient whose loss's graph holds a node "
            "without a rule anywhere, on x's path or not", "When gradient is rejected",
            lambda s: dataclasses.replace(s, more_rejections=(*s.more_rejections,
                                                              _no_rule_anywhere)),
            composes=True),
]


# --- the text form (SPEC.md, "Text form") ---------------------------------------------------


def _reads(rewrite: Callable[[str], str]) -> Callable[[Semantics], Semantics]:
    """Read the text otherwise: `rewrite` of what the semantics already reads."""
    return lambda s: dataclasses.replace(s, reads=lambda text: rewrite(s.reads(text)))


def _attributes_by_position(source: str) -> str:
    """Each line's attribute values taken for the keys in the printer's order, whatever key
    each was written with."""
    lines = []
    for line in source.splitlines():
        code, hash_, comment = line.partition("#")
        tokens = code.split()
        at = [k for k, t in enumerate(tokens) if "=" in t and t != "="]
        pairs = [tokens[k].split("=", 1) for k in at]
        keys = sorted((key for key, _ in pairs),
                      key=lambda key: ATTRIBUTE_ORDER.index(key)
                      if key in ATTRIBUTE_ORDER else len(ATTRIBUTE_ORDER))
        for k, key, (_, value) in zip(at, keys, pairs, strict=True):
            tokens[k] = f"{key}={value}"
        indent = code[:len(code) - len(code.lstrip())]
        lines.append(indent + " ".join(tokens) + (hash_ + comment if hash_ else ""))
    return "\n".join(lines) + "\n"


_UPPER_EXPONENT = re.compile(r"(?<![%@\w.])(-?(?:\d+\.?\d*|\.\d+))E([+-]?\d+)\b")


_AXIS_LIST = re.compile(r"\baxis=\[([^\]]*)\]")
_RANGE_COUNT = re.compile(r"(\brange\s+)-\d+\b")


def _axis_in_any_order(source: str) -> str:
    """Each `axis=[...]` list read as the axes it names, in increasing order."""
    def ordered(m: re.Match) -> str:
        axes = [a.strip() for a in m.group(1).split(",") if a.strip()]
        if not all(a.lstrip("-").isdigit() for a in axes):
            return m.group(0)
        return f"axis=[{','.join(str(a) for a in sorted(int(a) for a in axes))}]"
    return _AXIS_LIST.sub(ordered, source)


def _negative_range_runs_none(source: str) -> str:
    """A range of a negative count read as one of 0, which runs its body no times."""
    return _RANGE_COUNT.sub(lambda m: f"{m.group(1)}0", source)


_NAME = re.compile(r"%[A-Za-z_][A-Za-z0-9_.]*")
_DEFINES = re.compile(r"^\s*(%[A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(\S+)")


def _body_names_scoped(source: str) -> str:
    """A name a range body defines (its counter apart) read as the body's own, from its line
    to the body's `end`: renamed there (`%n` on line 7 to `%n.__body7`), so that it may
    shadow an outer name and be written again after the body. Lines keep their numbers; a
    function body, a namespace of its own already, is left as it is."""
    frames: list[dict[str, str]] = []  # one per open range: its body's renames
    in_def = False
    lines = []
    for number, line in enumerate(source.splitlines(), start=1):
        code, hash_, comment = line.partition("#")
        head = code.split()
        defines = _DEFINES.match(code)
        opens = defines is not None and defines.group(2) == "range"
        if head[:1] == ["def"]:
            in_def = True
        elif in_def and head[:1] == ["end"] and len(head) > 1 and head[1].startswith("@"):
            in_def = False
        if in_def or not frames:
            frames += [{}] if opens and not in_def else []
            lines.append(line)
            continue
        renames = {k: v for frame in frames for k, v in frame.items()}
        start = defines.end(1) if defines else 0
        rest = _NAME.sub(functools.partial(_renamed, renames), code[start:])
        target = code[:start]
        if head[:1] == ["end"]:
            frames.pop()
        elif opens:
            frames.append({})
        elif defines:
            name = defines.group(1)
            frames[-1][name] = f"{name}.__body{number}"
            target = code[:defines.start(1)] + frames[-1][name]
        lines.append(target + rest + hash_ + comment)
    return "\n".join(lines) + "\n"


def _renamed(renames: dict[str, str], m: re.Match) -> str:
    return renames.get(m.group(0), m.group(0))


def _function_names_global(source: str) -> str:
    """The names of every function body and of the top level read as one namespace: a line
    (a def's, for its parameters) that assigns a name another namespace assigned before it is
    read as a line the reference rejects there (an op without its operands)."""
    owner: dict[str, int] = {}  # name -> the namespace that assigned it first (0: top level)
    space, count = 0, 0
    lines = source.splitlines()
    for number, line in enumerate(lines):
        head = line.partition("#")[0].split()
        if head[:1] == ["def"]:
            count += 1
            space = count
            assigned = [t for t in head[2:] if t.startswith("%")]
        elif head[:1] == ["end"] and head[1:2] and head[1].startswith("@"):
            space = 0
            continue
        else:
            defines = _DEFINES.match(line)
            assigned = [defines.group(1)] if defines else []
        clash = [n for n in assigned if owner.setdefault(n, space) != space]
        if clash:
            lines[number] = f"{clash[0]} = add"
    return "\n".join(lines) + "\n"


def _lowercase_exponent_only(source: str) -> str:
    """An f32 literal with a capital E read as its mantissa and a name (1E-3: 1 and E-3),
    which no statement takes."""
    return _UPPER_EXPONENT.sub(lambda m: f"{m.group(1)} %E{m.group(2).lstrip('+-')}", source)


def _single_spaces(source: str) -> str:
    """A line split at every single space, indentation apart: two spaces make an empty
    token, read as an operand named by nothing."""
    lines = []
    for line in source.splitlines():
        code = line.lstrip(" ")
        indent = line[:len(line) - len(code)]
        lines.append(indent + code.replace("  ", " %_ "))
    return "\n".join(lines) + "\n"


TEXT = [
    Variant("attributes-by-position", "reads a statement's attribute values in the "
            "printer's order of keys, whatever keys they were written with", "Text form",
            _reads(_attributes_by_position), composes=True),
    # The decisions of SPEC.md that the course text leaves open, read the other way.
    Variant("axis-in-any-order", "reads an axis= list in any order, as the axes it names "
            "(SPEC.md decides that they are listed in strictly increasing order)", "Operations",
            _reads(_axis_in_any_order), composes=True,
            decision="**Decision (axis-lists):** `axis` lists axes in strictly increasing "
                     "order, each within the rank.",
            control=lambda source: _each_line(source, _axes_sorted)),
    Variant("negative-range-runs-none", "runs a range of a negative count no times, as one of "
            "0 (SPEC.md decides that the count must be >= 0)", "Loops",
            _reads(_negative_range_runs_none), composes=True,
            decision="**Decision (range-count):** it must be ≥ 0, and 0 runs the body no times."),
    Variant("body-names-scoped", "reads a range body's names as the body's own scope: a body "
            "may define a name the outside has, and a later line may define one a body had "
            "(SPEC.md decides each name is assigned once in the whole top level)", "Text form",
            _reads(_body_names_scoped), composes=True,
            decision="**Decision (once-across-bodies):** \"once\" holds across the whole top "
                     "level, range bodies included: a body cannot reuse an outer name, and no "
                     "later line can reuse a body's name."),
    Variant("function-names-global", "reads the names of function bodies and of the top "
            "level as one namespace, rejecting a name one of them repeats (SPEC.md decides "
            "that a body has names of its own)", "Functions", _reads(_function_names_global),
            composes=True,
            decision="**Decision (body-scope):** a body sees only its parameters and its own "
                     "names, and its names may repeat top-level names."),
    Variant("lowercase-exponent-only", "reads only a lowercase e as an exponent (1E-3 is no "
            "literal)", "Text form", _reads(_lowercase_exponent_only), composes=True),
    Variant("single-spaces", "splits a line at every space, so that two spaces make an empty "
            "token", "Text form", _reads(_single_spaces), composes=True),
]


# --- tapes (SPEC.md, "Tapes") ---------------------------------------------------------------


def _tape_program_order(domain, shares, senders):
    order = sorted(range(len(shares)), key=lambda k: -1 if senders[k] is None else senders[k])
    return tape_left_fold(domain, [shares[k] for k in order], [])


def _tape_right_fold(domain, shares, senders):
    total = shares[-1]
    for share in reversed(shares[:-1]):
        total = domain.add(share, total)
    return total


def _tape_depth_first(entries: list) -> list[int]:
    """micrograd's order: the reverse of a depth-first post-order from the last entry,
    operand i visited before j (iterative: a tape may be long)."""
    finished: list[int] = []
    seen: set[int] = set()
    stack: list[tuple[int, bool]] = [(len(entries) - 1, False)]
    while stack:
        k, done = stack.pop()
        if done:
            finished.append(k)
            continue
        if k in seen:
            continue
        seen.add(k)
        stack.append((k, True))
        if entries[k][0] not in TAPE_LEAVES:
            stack.extend((o, False) for o in (entries[k][2], entries[k][1]))  # i on top
    return finished[::-1]


def _tape_kahn(entries: list) -> list[int]:
    """Kahn's order: from the last entry, a queue; an entry joins it once every entry that
    uses it (of those the last depends on) has been processed, operand i counted first."""
    reached = set(_tape_depth_first(entries))
    users = [0] * len(entries)
    for k in reached:
        if entries[k][0] not in TAPE_LEAVES:
            users[entries[k][1]] += 1
            users[entries[k][2]] += 1
    order, queue = [], deque([len(entries) - 1])
    while queue:
        k = queue.popleft()
        order.append(k)
        if entries[k][0] not in TAPE_LEAVES:
            for o in (entries[k][1], entries[k][2]):
                users[o] -= 1
                if users[o] == 0:
                    queue.append(o)
    return order


class Binary64(ExactF32):
    """A tape computed in binary64 throughout, each derivative rounded to f32 at the end."""

    # binary64 values, not f32 bits: the whole domain computes in binary64
    literal = staticmethod(exact.decode)  # type: ignore[assignment]
    add = staticmethod(lambda a, b: a + b)
    mul = staticmethod(lambda a, b: a * b)
    to_bits = staticmethod(exact.f32_from_float)


TAPES = [
    Variant("tape-program-order", "sums an entry's shares in program order (by sender), not "
            "in arrival order", "Tapes", _set(tape_fold=_tape_program_order), tape=True),
    Variant("tape-right-fold", "sums an entry's shares as a right fold", "Tapes",
            _set(tape_fold=_tape_right_fold), tape=True),
    Variant("tape-const-zero", "gives every constant the derivative 0", "Tapes",
            _set(tape_leaf=lambda domain, kind, g: domain.literal(exact.POS_ZERO)
                 if kind == "const" else g), tape=True),
    Variant("tape-same-operand-once", "passes one share, not two, to an operand an entry "
            "uses twice (i == j)", "Tapes",
            _set(tape_operands=lambda i, j: (0,) if i == j else (0, 1)), tape=True),
    Variant("tape-binary64", "computes the tape's values and derivatives in binary64, "
            "rounding each derivative to f32 at the end", "Tapes",
            _set(tape_domain=Binary64()), tape=True),
    Variant("tape-depth-first", "processes the entries in the reverse of a depth-first "
            "post-order from the last (micrograd's order), operand i first, not from the last "
            "entry to the first", "Tapes", _set(tape_order=_tape_depth_first), tape=True),
    Variant("tape-kahn", "processes the entries in Kahn's order, a queue from the last entry "
            "that an entry joins once all its users are processed, not from the last entry to "
            "the first", "Tapes", _set(tape_order=_tape_kahn), tape=True),
    Variant("tape-blocked-past-eight", "sums an entry's shares left to right when fewer than "
            "8, else in 8 running sums combined pairwise, as numpy sums 8 or more values",
            "Tapes", _set(tape_fold=lambda domain, shares, senders: _blocked(domain.add,
                                                                            shares)),
            tape=True),
    Variant("tape-fold-from-zero", "starts each sum of an entry's shares from 0.0 (a "
            "derivative of -0.0 is then +0.0)", "Tapes",
            _set(tape_fold=lambda domain, shares, senders: tape_left_fold(
                domain, [domain.literal(exact.POS_ZERO), *shares], [])), tape=True),
    Variant("tape-zero-passes-nothing", "passes nothing on from an entry whose derivative is "
            "+0.0 or -0.0", "Tapes",
            _set(tape_passes_on=lambda domain, g: domain.to_bits(g) & 0x7FFFFFFF != 0),
            tape=True),
]


CATALOGUE: dict[str, Variant] = {v.name: v for v in
                                 WALK + INTERNING + RULE_FORMS + FORWARD + REJECTIONS + TEXT +
                                 TAPES}


@dataclass(frozen=True, order=True)
class Part:
    """One part of the spec that a variant replaces: a field of the Semantics (`field`);
    within the rules, a row (`key`, its op; `sub`, a reduce's op=); within the f32 domain, a
    method (`key`: `max`, `fold_row`, `to_bool`) or an entry of its `overrides` or `arrays`
    table (`key` the table, `sub` the op). Printed as a dotted name: `rules.reduce.max`."""

    field: str
    key: str = ""
    sub: str = ""

    def __str__(self) -> str:
        return ".".join(filter(None, (self.field, self.key, self.sub)))

    @property
    def table(self) -> str | None:
        """The domain's table the part is an entry of (`overrides`, `arrays`), if any."""
        return self.key if self.field == "domain" and self.key in DOMAIN_TABLES else None


DOMAIN_TABLES = ("overrides", "arrays")


def parts(variant: Variant) -> frozenset[Part]:
    """What the variant replaces in the spec, read off its change: the fields of the
    Semantics it gives otherwise, and within them the rows of the rules and what of the f32
    domain (a method, or an entry of its overrides or arrays)."""
    changed = variant.semantics()
    found: set[Part] = set()
    for f in dataclasses.fields(Semantics):
        spec, theirs = getattr(SPEC, f.name), getattr(changed, f.name)
        if spec is theirs or (f.name == "rejections" and spec == theirs):
            continue
        if f.name == "rules":
            found |= {Part("rules", *k.split(".", 1)) for k in set(spec) | set(theirs)
                      if spec.get(k) is not theirs.get(k)}
        elif f.name == "domain":
            found |= _domain_parts(spec, theirs)
        else:
            found.add(Part(f.name))
    return frozenset(found)


def _domain_parts(spec, theirs) -> set[Part]:
    found = set()
    for cls in type(theirs).__mro__:
        if isinstance(spec, cls):
            break
        found |= {Part("domain", k) for k in vars(cls) if not k.startswith("_") and
                  k not in DOMAIN_TABLES}
    for table in DOMAIN_TABLES:
        mine, yours = getattr(spec, table, {}), getattr(theirs, table, {})
        found |= {Part("domain", table, k[0] if isinstance(k, tuple) else k)
                  for k in set(mine) | set(yours) if mine.get(k) is not yours.get(k)}
    return found


# Where each of the f32 domain's conversions is used (the others are ops' own methods).
CONVERSIONS = {"to_i32": "cast", "from_i32": "cast", "to_bool": "cast", "from_bool": "cast",
               "to_bits": "bitcast", "from_bits": "bitcast", "constant": "detach"}
GRADIENT_PARTS = frozenset({"post_order", "fold", "flows", "depends_on", "range_inputs",
                            "rejections", "more_rejections"})


def implicated_ops(variant: Variant) -> frozenset[str]:
    """The ops whose rule or value the variant changes (a report's op table shows only
    those): a row of the rules, an op's arithmetic, a conversion's op; never the walk, the
    text or hash consing, which are no op's."""
    found: set[str] = set()
    for part in parts(variant):
        if part.field == "rules":
            if part.key in OPS:
                found.add(feature(part.key, part.sub or None))
        elif part.field == "domain":
            needs = _needs(part)
            found |= {f for need in needs or () for f in need} - {"gradient"}
    return frozenset(found)


def _needs(part: Part) -> tuple[frozenset[str], ...] | None:
    """What a case must use for `part` to change its outcome: each set one of whose features
    it must use (all of the sets); () for any case; None when the part changes nothing
    alone (a helper op that only the variant's own rules build)."""
    if part.field in GRADIENT_PARTS:
        return (frozenset({"gradient"}),)
    if part.field == "rules":
        if part.key not in OPS:
            return None
        return (frozenset({"gradient"}), frozenset({feature(part.key, part.sub or None)}))
    if part.field != "domain":
        return ()  # the text, literals, hash consing: any case
    if part.key == "fold_row":
        return (frozenset({"reduce", "reduce_mul"}),)
    if part.table is not None:
        if part.sub not in OPS:
            return None
        return (frozenset({part.sub, "reduce_mul"} if part.sub == "reduce" else {part.sub}),)
    method = part.key
    if method in CONVERSIONS:
        return (frozenset({CONVERSIONS[method]}),)
    ops = {op.name for op in OPS.values() if op.computed("f32") == method}
    ops |= {feature("reduce", r) for r in REDUCE_OPS if OPS[r].computed("f32") == method}
    return (frozenset(ops),) if ops else ()


def applies(variant: Variant, features: frozenset[str]) -> bool:
    """Whether the variant can change the outcome of a case that uses `features`: some part
    it replaces is one the case uses (the arithmetic of one of its ops, reduces included;
    the rule of one, in a gradient; the walk, in a gradient; the text, anywhere)."""
    for part in parts(variant):
        needs = _needs(part)
        if needs is not None and all(need & features for need in needs):
            return True
    return False


def composable(first: Variant, then: Variant) -> bool:
    """Whether `then` applied over `first` is both in effect: they replace different parts
    (a helper op both add, which no case uses, apart), or `then` wraps what it is given."""
    def matters(v: Variant) -> set[Part]:
        return {p for p in parts(v) if _needs(p) is not None}
    return then.composes or not matters(first) & matters(then)


# Variants that no program can tell from the spec, and why (each proven, not presumed).
EQUIVALENT: dict[str, str] = {}


def implementation(name: str):
    """The reference with one variant, as a module for `--impl=variant:NAME`: a faulty
    implementation whose fault the catalogue names."""
    import types

    from gradient_conformance import reference
    from gradient_conformance.reference.tape import backprop_bits
    if name not in CATALOGUE:
        raise KeyError(f"no variant {name!r} in the catalogue (gradient-conformance mutants "
                       "--list lists them)")
    semantics = CATALOGUE[name].semantics()
    return types.SimpleNamespace(
        NAME=f"variant {name}", VERSION=reference.VERSION, CAPABILITIES=None,
        build=lambda source: reference.build(source, semantics),
        backprop=lambda tape: [exact.decode(b) for b in backprop_bits(tape, semantics)])
