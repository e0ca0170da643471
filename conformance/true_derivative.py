"""The true derivative's numerics (test_derivative.py): each gradient slot's truth by
forward-mode dual numbers over the reals, and the comparison of an implementation's value
with it within a bound. docs/suite.md, "The conformance suite"."""

from __future__ import annotations

import math

import numpy as np

from gradient_conformance.conformance.findings import Finding, ProgramCase
from gradient_conformance.conformance.outcome import compare
from gradient_conformance.conformance.readings import hash_consed_gradients
from gradient_conformance.conformance.tallies import TRUTH
from gradient_conformance.reference import exact
from gradient_conformance.reference.interp import Interpreter, from_numpy
from gradient_conformance.reference.program import (
    Define,
    Program,
    Store,
    cone,
)
from gradient_conformance.reference.realvalued import Real

# The bound against the true derivative (test_derivative.py says why): K times the
# reference's own f32 error at the point, plus C ulps of the true value; the truth from
# DIGITS-digit finite differences with a relative step of STEP.
K, C = 4, 4


DIGITS, STEP = 50, 1e-20


def ulp(value: float) -> float:
    """The f32 ulp at `value` (the smallest subnormal at 0 and beyond the finite)."""
    if value == 0 or not math.isfinite(value):
        return 2.0**-149
    return float(np.spacing(np.float32(abs(value)))) or 2.0**-149


def truths(program: Program, buffers) -> tuple[dict[int, list], set[int]] | None:
    """Every f32 slot's true final value, and which slots came from finite differences; None
    where a gradient is taken against copies that tie (ties_among_copies): no truth there."""
    domain = Real(DIGITS)

    def run(arrays, pinned=None):
        memory = {slot: from_numpy(array, program.buffers[slot].dtype, domain)
                  for slot, array in arrays.items()}
        return Interpreter(program, domain).evaluate(memory, pinned)

    final, env = run(buffers)
    if ties_among_copies(program, env):
        return None
    values = {slot: list(final[slot].flat) for slot, node in program.buffers.items()
              if node.dtype == "f32"}
    pinned = {node: value for node, value in env.items() if node.op == "detach"}
    differenced = set()
    for slot, y, x in _gradients_of_inputs(program):
        column = []
        for i, xi in enumerate(buffers[x].ravel().astype(np.float64)):
            h = domain.mp.mpf(STEP) * max(abs(domain.mp.mpf(float(xi))), 1e-3)
            sides = []
            for sign in (1, -1):
                moved = {k: from_numpy(v, program.buffers[k].dtype, domain)
                         for k, v in buffers.items()}
                moved[x].flat[i] = moved[x].flat[i] + sign * h
                _, moved_env = Interpreter(program, domain).evaluate(moved, pinned)
                sides.append(moved_env[y].item())
            column.append((sides[0] - sides[1]) / (2 * h))
        values[slot] = column
        differenced.add(slot)
    return values, differenced


def ties_among_copies(program: Program, env) -> bool:
    """Whether a gradient is taken against a value whose elements are copies of one number
    (an expand's, a broadcast's) with a max or a comparison between that value and its loss,
    read from a run over the reals (`env`: each node's value). Real reads a max of a number
    with itself as no kink: true of what the copies were made from, which moves them all at
    once, not of the copies, each of which the gradient moves on its own (issue 53: a six-way
    tie of a reduce max taken against the tied vector itself was given "the true value
    0.1666...", where no derivative exists). The truth asks it; the drawing does not."""
    for d in program.statements:
        expansion = getattr(d, "expansion", None)
        if expansion is None:
            continue
        value = env.get(expansion.x)
        if value is None or np.size(value) < 2:
            continue
        if len({id(v) for v in np.asarray(value, dtype=object).flat}) == np.size(value):
            continue  # every element a number of its own
        seen, stack = set(), [expansion.y]
        while stack:
            node = stack.pop()
            if node in seen or node is expansion.x:
                continue
            seen.add(node)
            if node.op in ("max", "cmplt", "cmpne") or \
                    (node.op == "reduce" and node.attr("op") == "max"):
                return True
            stack.extend(node.operands)
    return False


def _gradients_of_inputs(program):
    """(slot the gradient is stored in, loss node, input slot) for each top-level gradient
    whose x is a load of a whole input buffer, before any store to it."""
    found: list[tuple] = []
    stored: dict = {}
    for s in program.statements:
        if isinstance(s, Store) and s.index is None:
            stored.setdefault(s.value, s.buffer.attr("slot"))
    for s in program.statements:
        if isinstance(s, Define) and s.expansion is not None:
            x = s.expansion.x
            if x.op == "load" and len(x.operands) == 1 and x.tag == 0 and s.node in stored:
                found.append((stored[s.node], s.expansion.y, x.operands[0].attr("slot")))
    return found


def near_the_truth(tally, reading, buffers, want, got, description: str = "", *,
                   only=None) -> None:
    """Raise Diverged unless every f32 output the implementation gave (`got`) is within the
    bound of the truth, at this point; slots made from a gradient taken against a node
    hash consing made another gradient's are left out (checks/test_derivative.py says
    why). `only`: the slots to compare (all, by default). Each output compared goes on the
    ledger (TRUTH); one whose truth is not finite (an overflow, a pole) is left out."""
    program = reading.program()
    found = truths(program, buffers)
    if found is None:
        slots = [s for s, n in program.buffers.items() if n.dtype == "f32" and
                 (only is None or s in only)]
        tally.leave_out("a gradient against copies of one number that tie at a max or a "
                        "comparison: each copy is its own variable there, and no true "
                        "derivative exists", sum(int(np.size(want.buffers[s])) for s in slots
                                                 if s in want.buffers))
        return
    values, differenced = found
    structural = {d.node for d in hash_consed_gradients(program)}
    left_out = {slot for slot in values if cone(program, slot)[0] & structural}
    tally.measure("derivative", cases=1, differenced=len(differenced), bound_K=K, bound_C=C,
                  left_out_hash_consed=len(left_out))
    for slot, reals in values.items():
        if only is not None and slot not in only:
            continue
        if slot in left_out:
            tally.leave_out("made from a gradient whose x hash consing made another "
                            "gradient's node: no true derivative of the text's own",
                            len(reals))
            continue
        ref = want.buffers[slot].ravel().astype(np.float64)
        mine = got.buffers[slot].ravel().astype(np.float64)
        for k, real in enumerate(reals):
            truth = float(real)
            if not math.isfinite(truth) or not math.isfinite(ref[k]):
                # overflow or a pole: nothing to measure against
                tally.leave_out("no finite true value (an overflow or a pole)", 1)
                continue
            tally.compared(TRUTH, 1)
            allowed = K * abs(ref[k] - truth) + C * ulp(truth)
            # A NaN or an infinity where the truth is finite is as far off as can be.
            error = abs(mine[k] - truth) if math.isfinite(mine[k]) else math.inf
            tally.measure("derivative", outputs=1, over=int(error > allowed),
                          max_used=min(error / allowed, 1e9))
            if error > allowed:
                ulps = exact.ulp_distance(exact.encode(float(np.float32(truth))),
                                          exact.encode(float(np.float32(mine[k])))) \
                    if math.isfinite(mine[k]) else "inf"
                raise tally.diverged(Finding(
                    f"slot {slot}[{k}]: the true value is {truth!r}, the reference gives "
                    f"{float(ref[k])!r}; the implementation's {float(mine[k])!r} is off by "
                    f"{error:.3g} ({ulps} ulps), allowed {allowed:.3g} (K = {K}, C = {C})",
                    want, got, ProgramCase(reading, buffers), compare(want, got), description,
                    comparison="truth"))


KINK = 1e-3  # how far from every kink a point must be for its truth to be compared
