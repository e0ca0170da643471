"""Gradients against the true derivative, for every implementation, bit-exact or not.
SPEC.md, "The conformance suite".

At smooth points (at least 1e-3 from every kink, measured over the reals), each f32 output is
compared with the truth:
- a stored gradient against an input load x: central finite differences of the real-valued
  program (50 digits, step 1e-20 |x| relative to x, every detach pinned to its value at the
  point), read from the loss itself;
- any other f32 output (forward values, gradients against intermediate nodes): the program
  read over the reals, whose expanded gradients the oracle's own tests prove equal to finite
  differences to at least 20 digits.

The tolerance is derived, not guessed: an implementation may be off from the real value by
at most K times the reference's own f32 error at that point, plus C ulps of the real value.
K = 4 and C = 4: an implementation whose every op is within a few ulps, but which rounds in
another order (a fused op, a different fold), makes rounding errors of the same order as the
reference's; a wrong rule is off by the order of the derivative itself, thousands of ulps.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from gradient_conformance.conformance import running
from gradient_conformance.conformance.outcome import compare
from gradient_conformance.conformance.running import C, K
from gradient_conformance.generators import differentiable_programs
from gradient_conformance.reference import exact
from gradient_conformance.reference.interp import Interpreter, from_numpy
from gradient_conformance.reference.program import Define, Program, Store
from gradient_conformance.reference.realvalued import Real

RANK = 6  # where the suite runs these checks (plugin.rank): cheaper, more telling first


def truths(program: Program, buffers) -> tuple[dict[int, list], set[int]]:
    """Every f32 slot's true final value, and which slots came from finite differences."""
    domain = Real(running.DIGITS)

    def run(arrays, pinned=None):
        memory = {slot: from_numpy(array, program.buffers[slot].dtype, domain)
                  for slot, array in arrays.items()}
        return Interpreter(program, domain).evaluate(memory, pinned)

    final, env = run(buffers)
    values = {slot: list(final[slot].flat) for slot, node in program.buffers.items()
              if node.dtype == "f32"}
    pinned = {node: value for node, value in env.items() if node.op == "detach"}
    differenced = set()
    for slot, y, x in _gradients_of_inputs(program):
        column = []
        for i, xi in enumerate(buffers[x].ravel().astype(np.float64)):
            h = domain.mp.mpf(running.STEP) * max(abs(domain.mp.mpf(float(xi))), 1e-3)
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


def _gradients_of_inputs(program):
    """(slot the gradient is stored in, loss node, input slot) for each top-level gradient
    whose x is a load of a whole input buffer, before any store to it."""
    found, stored = [], {}
    for s in program.statements:
        if isinstance(s, Store) and s.index is None:
            stored.setdefault(s.value, s.buffer.attr("slot"))
    for s in program.statements:
        if isinstance(s, Define) and s.expansion is not None:
            x = s.expansion.x
            if x.op == "load" and len(x.operands) == 1 and x.tag == 0 and s.node in stored:
                found.append((stored[s.node], s.expansion.y, x.operands[0].attr("slot")))
    return found


@given(data=st.data())
def test_gradients_are_near_the_true_derivative(impl, tally, data):
    case = data.draw(differentiable_programs(exclude=running.exclusions(impl)))
    running.supported(impl, case, tally)
    reading, want, got = running.run_both(impl, case.source, case.buffers, case.parsed)
    if got.status != "ok":  # the verdict counts the case's conditions
        running.verdict(tally, reading, case.buffers, want, got, description=case.description)
    else:
        tally.reach(reading.conditions(case.buffers))
    assume(want.status == "ok")
    values, differenced = truths(reading.program(), case.buffers)
    tally.measure("derivative", cases=1, differenced=len(differenced), bound_K=K, bound_C=C)
    for slot, reals in values.items():
        ref = want.buffers[slot].ravel().astype(np.float64)
        mine = got.buffers[slot].ravel().astype(np.float64)
        for k, real in enumerate(reals):
            truth = float(real)
            if not math.isfinite(truth) or not math.isfinite(ref[k]):
                continue  # overflow or a pole: nothing to measure against
            allowed = K * abs(ref[k] - truth) + C * running.ulp(truth)
            # A NaN or an infinity where the truth is finite is as far off as can be.
            error = abs(mine[k] - truth) if math.isfinite(mine[k]) else math.inf
            tally.measure("derivative", outputs=1, over=int(error > allowed),
                          max_used=min(error / allowed, 1e9))
            if error > allowed:
                ulps = exact.ulp_distance(exact.encode(float(np.float32(truth))),
                                          exact.encode(float(np.float32(mine[k])))) \
                    if math.isfinite(mine[k]) else "inf"
                raise tally.diverged(running.Finding(
                    f"slot {slot}[{k}]: the true value is {truth!r}, the reference gives "
                    f"{float(ref[k])!r}; the implementation's {float(mine[k])!r} is off by "
                    f"{error:.3g} ({ulps} ulps), allowed {allowed:.3g} (K = {K}, C = {C})",
                    want, got, compare(want, got), case.description, reading, case.buffers))
