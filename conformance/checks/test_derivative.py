"""Gradients against the true derivative, for every implementation, bit-exact or not.
docs/suite.md, "The conformance suite".

At smooth points (at least 1e-3 from every kink, measured over the reals), each f32 output is
compared with the truth:
- a stored gradient against an input load x: central finite differences of the real-valued
  program (50 digits, step 1e-20 |x| relative to x, every detach pinned to its value at the
  point), read from the loss itself;
- any other f32 output (forward values, gradients against intermediate nodes): the program
  read over the reals, whose expanded gradients the oracle's own tests prove equal to finite
  differences to at least 20 digits.

A gradient taken against a node that, by hash consing, an earlier gradient's expansion built
is left out (with every slot computed from it): which node its x is follows from the rule
forms, so its value measures hash consing and op forms, which the bit-for-bit checks test,
not calculus (SPEC.md, "Hash consing").

The tolerance is derived, not guessed: an implementation may be off from the real value by
at most K times the reference's own f32 error at that point, plus C ulps of the real value.
K = 4 and C = 4: an implementation whose every op is within a few ulps, but which rounds in
another order (a fused op, a different fold), makes rounding errors of the same order as the
reference's; a wrong rule is off by the order of the derivative itself, thousands of ulps.
"""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from gradient_conformance.conformance import running, true_derivative
from gradient_conformance.generators import differentiable_programs

RANK = 6  # where the suite runs these checks (plugin.rank): cheaper, more telling first


@given(data=st.data())
def test_gradients_are_near_the_true_derivative(impl, tally, data):
    """Generated smooth programs: every f32 output within the bound of the true derivative
    (SPEC.md, "The rules")."""
    case = data.draw(differentiable_programs(exclude=running.exclusions(impl)))
    running.supported(impl, case, tally)
    reading, want, got = running.run_both(impl, case.source, case.buffers, case.parsed,
                                          built=case.built, tally=tally)
    if got.status != "ok":  # the verdict counts the case's conditions
        running.verdict(tally, reading, case.buffers, want, got, description=case.description)
    else:
        tally.reach(reading, case.buffers)
    assume(want.status == "ok")
    true_derivative.near_the_truth(tally, reading, case.buffers, want, got, case.description)
