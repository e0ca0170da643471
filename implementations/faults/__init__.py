"""Seeded faults: the fast implementation with one realistic bug each. The conformance suite
must catch every one (tests/test_seeded_faults.py). `--impl=implementations.faults.NAME`.

A fault replaces one patch point of implementations/fast.py while its program builds and
runs, and puts it back afterwards.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from gradient_conformance.implementations import fast


def _reversed_fold(shares, mk):
    total = shares[-1]
    for s in reversed(shares[:-1]):
        total = mk("add", total, s)
    return total


def _creation_order_fold(shares, mk):
    """Like a tape: shares summed in the order their nodes were made, not as they arrived."""
    return _original_fold(sorted(shares, key=lambda n: n.id), mk)


def _rule_with(overrides):
    original = fast.rule

    def rule(u, k, g, mk, f32):
        key = u.op if u.op != "reduce" else f"reduce.{dict(u.at)['op']}"
        if key in overrides:
            return overrides[key](u, k, g, mk, f32)
        return original(u, k, g, mk, f32)
    return rule


def _max_tie_to_first(u, k, g, mk, f32):
    a, b = u.args
    first_wins = mk("cmplt", a, b)  # ties and a > b go to a
    return mk("where", first_wins, f32(0.0), g) if k == 0 else mk("where", first_wins, g, f32(0.0))


def _recip_other_form(u, k, g, mk, f32):
    a = u.args[0]
    return mk("mul", mk("mul", g, f32(-1.0)), mk("recip", mk("mul", a, a)))




def _kept_apart(self, op, args, scope):
    """Every node of a range body kept apart from an equal one outside it, a pure one too
    (the old reading, which ir.md contradicts): a node is in the scope it is made in."""
    return scope


def _reduce_mul_as_add(u, k, g, mk, f32):
    return mk("expand", g, shape=u.args[0].sh)


def _sum_loss(y, mk):
    if y.dt == "f32" and y.op != "buffer" and y.sh != ():
        y = mk("reduce", y, op="add")  # a non-scalar loss summed implicitly
    return _original_check_loss(y, mk)


_original_fold = fast.fold
_original_check_loss = fast.check_loss
_original_reduce = fast._reduce
_original_elementwise = fast._elementwise
_original_has_rule = fast._has_rule


def _check_x_without_literal(x):
    if x.op == "buffer" or x.dt != "f32":
        raise fast.Invalid("[x-not-f32]")


def _pairwise_reduce(node, a):
    if dict(node.at)["op"] != "add" or node.dt != "f32" or a.size < 3:
        return _original_reduce(node, a)
    at = dict(node.at)
    axes = at.get("axis")
    axes = tuple(range(a.ndim)) if axes is None else axes
    kept = [k for k in range(a.ndim) if k not in axes]
    rows = np.transpose(a, kept + list(axes)).reshape(
        int(np.prod([a.shape[k] for k in kept])), int(np.prod([a.shape[k] for k in axes])))
    while rows.shape[1] > 1:
        half = rows.shape[1] // 2
        pairs = rows[:, : 2 * half : 2] + rows[:, 1 : 2 * half : 2]
        rows = np.concatenate([pairs, rows[:, 2 * half :]], axis=1).astype(np.float32)
    return rows[:, 0].reshape(node.sh)


def _flush_to_zero(op, dt, args):
    out = _original_elementwise(op, dt, args)
    if dt == "f32" and np.asarray(out).dtype == np.float32:
        out = np.asarray(out)
        tiny = (out != 0) & (np.abs(out) < np.float32(1.1754944e-38))
        out = np.where(tiny, np.copysign(np.float32(0), out), out).astype(np.float32)
    return out


def _reduce_mul_has_rule(n):
    return _original_has_rule(n) or (n.op == "reduce" and dict(n.at)["op"] == "mul")


FAULTS = {
    "reversed_fold": ("shares summed in reversed arrival order", {"fold": _reversed_fold}),
    "creation_order": ("shares summed in the order their nodes were made (a tape's order)",
                       {"fold": _creation_order_fold}),
    "detach_passes": ("detach passes the gradient through",
                      {"BLOCKING": ("buffer",), "rule": _rule_with(
                          {"detach": lambda u, k, g, mk, f32: g})}),
    "literal_x": ("a literal x is accepted", {"check_x": _check_x_without_literal}),
    "max_tie_first": ("a max tie sends all of g to the first operand",
                      {"rule": _rule_with({"max": _max_tie_to_first})}),
    "pairwise_reduce": ("reduce op=add sums pairwise, not as a left fold",
                        {"_reduce": _pairwise_reduce}),
    "flush_to_zero": ("f32 subnormal results are flushed to zero",
                      {"_elementwise": _flush_to_zero}),
    "reduce_mul_on_path": ("a reduce op=mul on the path is accepted (as if it were add)",
                           {"_has_rule": _reduce_mul_has_rule,
                            "rule": _rule_with({"reduce.mul": _reduce_mul_as_add})}),
    "nonscalar_loss": ("a non-scalar loss is summed implicitly", {"check_loss": _sum_loss}),
    "recip_form": ("the recip share is (g * -1) * recip(a * a)",
                   {"rule": _rule_with({"recip": _recip_other_form})}),
    "scopes_kept_apart": ("every node of a range body kept apart from an equal one outside it",
                          {"Graph.scope_of": _kept_apart}),
}
# Faults of the tape exercise (SPEC.md, "Tapes"): their modules define backprop only.
_original_tape_fold = fast.tape_fold
TAPE_FAULTS = {
    "tape_program_order": ("a tape entry's shares summed in program order (by sender)",
                           {"tape_fold": lambda shares: _original_tape_fold(sorted(
                               shares, key=lambda s: s[0]))}),
    "tape_const_zero": ("constants on a tape are given 0",
                        {"tape_leaf": lambda kind, g: np.float32(0.0) if kind == "const"
                         else g}),
    "tape_same_operand_once": ("an entry whose two operands are the same passes one share",
                               {"tape_operands": lambda i, j: (i,) if i == j else (i, j)}),
}


def _owner(name):
    """The object and attribute a patch point names: `fold` or `Graph.make`."""
    owner = fast
    *path, attribute = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, attribute


@contextmanager
def _patched(patches):
    saved = {name: getattr(*_owner(name)) for name in patches}
    for name, value in patches.items():
        owner, attribute = _owner(name)
        setattr(owner, attribute, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            owner, attribute = _owner(name)
            setattr(owner, attribute, value)


def seeded_tape(name: str):
    """backprop() for the fast implementation with tape fault `name`, and its NAME etc."""
    description, patches = TAPE_FAULTS[name]

    def backprop(tape):
        with _patched(patches):
            return fast.backprop(tape)

    backprop.__doc__ = f"The fast tape implementation with a seeded fault: {description}."
    return backprop, f"fast-fault-{name}", fast.VERSION, dict(fast.CAPABILITIES)


def seeded(name: str):
    """build() for the fast implementation with fault `name`, and its NAME and CAPABILITIES."""
    description, patches = FAULTS[name]

    def build(source: str):
        with _patched(patches):
            run = fast.build(source)

        def patched_run(buffers):
            with _patched(patches):
                return run(buffers)
        return patched_run

    build.__doc__ = f"The fast implementation with a seeded fault: {description}."
    return build, f"fast-fault-{name}", fast.VERSION, dict(fast.CAPABILITIES)
