"""Gradients against the true derivative, for every implementation, bit-exact or not.
SPEC.md, "The conformance suite".

At smooth points (at least 1e-3 from every kink, measured over the reals), each f32 output is
compared with the real value of the same program: the program run over the reals at 40
digits, its gradients included. The oracle's own tests prove that this real reading of the
expanded gradients agrees with finite differences of the real-valued program (x-relative
step, 80 digits) to at least 20 digits, so it stands for the mpmath derivative here; reading
it once per case avoids naming which slot is x.

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

import reference
from generators import differentiable_programs
from reference import exact
from reference.interp import Interpreter, from_numpy
from reference.realvalued import Real

from .checks import SUMMARY, declared, exclusions, expected, supported

K, C = 4, 4
WORST = {"abs": 0.0, "rel": 0.0, "ulps": 0, "cases": 0, "used": 0.0}


def real_outputs(source: str, buffers) -> dict[int, list]:
    """Every slot's final value over the reals (40 digits), f32 slots only."""
    program = reference.compile_program(source)
    domain = Real(40)
    memory = {slot: from_numpy(array, program.buffers[slot].dtype, domain)
              for slot, array in buffers.items()}
    final = Interpreter(program, domain).run(memory)
    return {slot: list(final[slot].flat) for slot, node in program.buffers.items()
            if node.dtype == "f32"}


def _ulp(value: float) -> float:
    if value == 0 or not math.isfinite(value):
        return 2.0**-149
    return float(np.spacing(np.float32(abs(value)))) or 2.0**-149


@given(data=st.data())
def test_gradients_are_near_the_true_derivative(impl, data):
    case = data.draw(differentiable_programs(exclude=exclusions(impl)))
    supported(impl, case)
    want = expected(case.source, case.buffers)
    got = impl.run_case(case.source, case.buffers, declared(case.source))
    assert got.status == "ok", f"{got.status}: {got.message}\n{case.source}"
    assume(want.status == "ok")
    WORST["cases"] += 1
    for slot, reals in real_outputs(case.source, case.buffers).items():
        ref = want.buffers[slot].ravel().astype(np.float64)
        mine = got.buffers[slot].ravel().astype(np.float64)
        for k, real in enumerate(reals):
            truth = float(real)
            if not math.isfinite(truth) or not math.isfinite(ref[k]):
                continue  # overflow or a pole: nothing to measure against
            allowed = K * abs(ref[k] - truth) + C * _ulp(truth)
            error = abs(mine[k] - truth)
            ulps = exact.ulp_distance(exact.encode(float(np.float32(truth))),
                                      exact.encode(float(np.float32(mine[k])))) \
                if math.isfinite(mine[k]) else 2**31
            WORST["abs"] = max(WORST["abs"], error)
            WORST["rel"] = max(WORST["rel"], error / max(abs(truth), 1e-300))
            WORST["ulps"] = max(WORST["ulps"], ulps)
            WORST["used"] = max(WORST["used"], error / allowed)
            SUMMARY["derivative"] = (
                f"gradients against the true derivative: {WORST['cases']} cases, max error "
                f"{WORST['abs']:.3g} absolute, {WORST['rel']:.3g} relative, "
                f"{WORST['ulps']} ulps (where f32 cancellation leaves the reference as far "
                f"off); at most {WORST['used']:.0%} of the allowed tolerance used")
            assert error <= allowed, (
                f"slot {slot}[{k}]: the true value is {truth!r}, the reference gives "
                f"{ref[k]!r}, the implementation {mine[k]!r}: off by {error:.3g} "
                f"({ulps} ulps), allowed {allowed:.3g} (K = {K}, C = {C})\n{case.source}")
