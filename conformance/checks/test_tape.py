"""The tape exercise: `backprop(tape)` bit for bit, against finite differences, the order of
its sums, and its rejections. SPEC.md, "Tapes". These run for an implementation that defines
`backprop`; one that does not sees them skipped, with the reason."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance import resource
from gradient_conformance.conformance.checks.test_derivative import DIGITS, STEP, C, K, _ulp
from gradient_conformance.conformance.implementation import Outcome
from gradient_conformance.conformance.record import RECORDER
from gradient_conformance.generators.tapes import invalid_tapes, order_sensitive_tapes, tapes
from gradient_conformance.reference import exact
from gradient_conformance.reference.realvalued import Real
from gradient_conformance.reference.tape import backprop_bits, check, forward, load_tape_case

PROTOCOL_FUNCTION = "backprop"  # the plugin skips these checks for a module without it
PATHS = sorted(resource("cases", "tapes").glob("*.json"))
# The tolerance of test_derivative.py, for the same reasons.


def compare(tape, want: list[int], got: Outcome, description: str) -> str | None:
    """None when the derivatives agree bit for bit (any NaN matching any NaN)."""
    if got.status != "ok":
        problem = f"expected derivatives, got {got.status}: {got.message}"
    else:
        bad = [k for k, (a, b) in enumerate(zip(want, got.derivatives, strict=True))
               if not exact.same_f32(a, b)]
        if not bad:
            return None
        k = bad[0]
        a, b = want[k], got.derivatives[k]
        problem = (f"entry {k} ({tape[k]}): expected {exact.f32_to_text(a)} (0x{a:08x}), got "
                   f"{exact.f32_to_text(b)} (0x{b:08x}), {exact.ulp_distance(a, b)} ulps "
                   f"apart; {len(bad)} of {len(want)} derivatives differ")
    RECORDER.diverged_tape(tape, Outcome("ok", derivatives=want), got, summary=problem,
                           description=description)
    return problem


def check_tape(impl, case) -> None:
    """A drawn tape's derivatives, bit for bit against the reference's."""
    RECORDER.case({"tape"})
    got = impl.run_backprop(case.tape)
    problem = compare(case.tape, backprop_bits(case.tape), got, case.description)
    assert problem is None, f"{problem}\ntape: {case.tape}"


@given(data=st.data())
def test_tapes_bit_for_bit(impl, data):
    check_tape(impl, data.draw(tapes()))


@given(data=st.data())
def test_tape_shares_are_summed_in_arrival_order(impl, data):
    """Tapes whose sums depend on the order: a failure's diagnosis names the order used."""
    check_tape(impl, data.draw(order_sensitive_tapes()))


def _true_derivative(entries, k):
    """d(last)/d(entry k) over the reals: central differences, entry k's value moved by h."""
    domain = Real(DIGITS)
    exact_values = forward(entries, domain)
    v = exact_values[k].value
    h = domain.mp.mpf(STEP) * max(abs(v), domain.mp.mpf("1e-3"))
    up = forward(entries, domain, override={k: v + h})[-1].value
    down = forward(entries, domain, override={k: v - h})[-1].value
    return float((up - down) / (2 * h))


@given(data=st.data())
def test_tape_derivatives_are_near_the_true_derivative(impl, data):
    """Within K times the reference's own f32 error plus C ulps, at every entry (adds and
    muls are smooth everywhere, so every point is a smooth point)."""
    case = data.draw(tapes(smooth=True, max_entries=8))
    RECORDER.case({"tape"})
    got = impl.run_backprop(case.tape)
    want = backprop_bits(case.tape)
    if got.status != "ok":
        problem = compare(case.tape, want, got, case.description)
        raise AssertionError(f"{problem}\ntape: {case.tape}")
    entries = check(case.tape)
    for k in range(len(entries)):
        ref, mine = exact.decode(want[k]), exact.decode(got.derivatives[k])
        if not math.isfinite(ref):
            continue  # an overflow: nothing to measure against
        truth = _true_derivative(entries, k)
        allowed = K * abs(ref - truth) + C * _ulp(truth)
        error = abs(mine - truth) if math.isfinite(mine) else math.inf
        if error > allowed:
            problem = (f"entry {k}: the true derivative is {truth!r}, the implementation's "
                       f"{mine!r} is off by {error:.3g}, allowed {allowed:.3g} (K = {K}, "
                       f"C = {C})")
            RECORDER.diverged_tape(case.tape, Outcome("ok", derivatives=want), got,
                                   summary=problem, description=case.description)
            raise AssertionError(f"{problem}\ntape: {case.tape}")


@given(data=st.data())
def test_invalid_tapes_are_rejected(impl, data):
    case = data.draw(invalid_tapes())
    RECORDER.case({"tape"})
    got = impl.run_backprop(case.tape)
    if got.status != "rejected":
        RECORDER.diverged_tape(case.tape, Outcome("rejected", message=case.expect_error), got,
                               summary=f"a tape with a bad {case.expect_error} was accepted",
                               description=case.description)
    assert got.status == "rejected", (f"{case.description}: expected a rejection "
                                      f"({case.expect_error}), got {got.status}")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: f"tapes/{p.name}")
def test_tape_case_file(impl, path):
    case = load_tape_case(path.read_text())
    got = impl.run_backprop(case["tape"])
    if case["error"] is not None:
        if got.status != "rejected":
            RECORDER.diverged_tape(case["tape"], Outcome("rejected", message=case["error"]),
                                   got, summary=f"expected a rejection ({case['error']})",
                                   description=case["description"])
        assert got.status == "rejected", f"expected a rejection ({case['error']}), got " \
            f"{got.status} {got.derivatives}"
        return
    problem = compare(case["tape"], case["derivatives"], got, case["description"])
    assert problem is None, f"{path.name}: {problem}"
