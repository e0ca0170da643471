"""The tape exercise: `backprop(tape)` bit for bit, against finite differences, the order of
its sums, and its rejections. SPEC.md, "Tapes". These run for an implementation that defines
`backprop`; one that does not sees them skipped, with the reason."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance import resource
from gradient_conformance.conformance import running
from gradient_conformance.conformance.findings import Finding, TapeCase
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.tallies import BITS, STATUS, TRUTH
from gradient_conformance.conformance.true_derivative import DIGITS, STEP, C, K, ulp
from gradient_conformance.generators.tapes import (
    invalid_tapes,
    order_sensitive_tapes,
    tape_cases,
    tapes,
)
from gradient_conformance.reference import exact
from gradient_conformance.reference.realvalued import Real
from gradient_conformance.reference.tape import backprop_bits, check, forward, load_tape_case

RANK = 3  # where the suite runs these checks (plugin.rank): cheaper, more telling first

PROTOCOL_FUNCTION = "backprop"  # the plugin skips these checks for a module without it
PATHS = sorted(resource("cases", "tapes").glob("*.json"))


def tape_verdict(tally, tape, want: Outcome, got: Outcome, description: str,
                 context: str = "") -> None:
    """Raise Diverged unless the tape's outcomes agree (compare: bit for bit, any NaN
    matching any NaN; a rejection by kind only)."""
    if want.status == "ok" and want.derivatives:
        tally.compared(BITS, len(want.derivatives))
    else:
        tally.compared(STATUS, 1)
    difference = compare(want, got)
    if difference is not None:
        raise tally.diverged(Finding(f"{context}{difference}", want, got, TapeCase(tape),
                                     difference, description))


def check_tape(impl, tally, case) -> None:
    """A drawn tape's derivatives, bit for bit against the reference's."""
    tally.case({"tape"})
    tape_verdict(tally, case.tape, Outcome("ok", derivatives=backprop_bits(case.tape)),
                 impl.run_backprop(case.tape), case.description)


@given(data=st.data())
def test_tapes_bit_for_bit(impl, tally, data):
    """Generated tapes for backprop(): every derivative bit for bit."""
    check_tape(impl, tally, data.draw(tapes()))


@given(data=st.data())
def test_tape_shares_are_summed_in_arrival_order(impl, tally, data):
    """Tapes whose sums depend on the order: a failure's diagnosis names the order used."""
    check_tape(impl, tally, data.draw(order_sensitive_tapes()))


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
def test_tape_derivatives_are_near_the_true_derivative(impl, tally, data):
    """Within K times the reference's own f32 error plus C ulps, at every entry (adds and
    muls are smooth everywhere, so every point is a smooth point); the bound of
    test_derivative.py, for the same reasons."""
    case = data.draw(tapes(smooth=True, max_entries=8))
    tally.case({"tape"})
    got = impl.run_backprop(case.tape)
    want = Outcome("ok", derivatives=backprop_bits(case.tape))
    if got.status != "ok":
        tape_verdict(tally, case.tape, want, got, case.description)
    entries = check(case.tape)
    for k in range(len(entries)):
        ref, mine = exact.decode(want.derivatives[k]), exact.decode(got.derivatives[k])
        if not math.isfinite(ref):
            tally.leave_out("no finite true value (an overflow)", 1)
            continue  # an overflow: nothing to measure against
        truth = _true_derivative(entries, k)
        allowed = K * abs(ref - truth) + C * ulp(truth)
        error = abs(mine - truth) if math.isfinite(mine) else math.inf
        tally.compared(TRUTH, 1)
        if error > allowed:
            raise tally.diverged(Finding(
                f"entry {k}: the true derivative is {truth!r}, the implementation's {mine!r} "
                f"is off by {error:.3g}, allowed {allowed:.3g} (K = {K}, C = {C})", want, got,
                TapeCase(case.tape), compare(want, got), case.description))


@given(data=st.data())
def test_invalid_tapes_are_rejected(impl, tally, data):
    """Generated tapes that break a rule of the tape format: rejected."""
    case = data.draw(invalid_tapes())
    tally.case({"tape"})
    tape_verdict(tally, case.tape, Outcome("rejected", message=case.expect_error),
                 impl.run_backprop(case.tape), case.description,
                 context=f"a tape with a bad {case.expect_error}: ")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: f"tapes/{p.name}")
def test_tape_case_file(impl, tally, path):
    """Each tape case file the package ships, through backprop()."""
    case = load_tape_case(path.read_text())
    want = (Outcome("rejected", message=case["error"]) if case["error"] is not None else
            Outcome("ok", derivatives=case["derivatives"]))
    tape_verdict(tally, case["tape"], want, impl.run_backprop(case["tape"]),
                 f"tape case file {path.name}")


ENUMERATED = {case.name: case for case in tape_cases()}


@pytest.mark.parametrize("name", sorted(ENUMERATED))
def test_tape_at_every_class_and_fan_in(impl, tally, name):
    """An enumerated tape (generators/tapes.py, "Tapes by construction"), every derivative
    bit for bit: add and mul at every class of their operands and of the derivative they
    receive, and one entry receiving 1 to 9 shares through structures that the orders a
    walk could take tell apart. A divergence is reported on the tape of the first row that
    differs, run again (else of every row that does; else the whole tape)."""
    case = ENUMERATED[name]
    tally.case({"tape"})
    want = Outcome("ok", derivatives=backprop_bits(case.tape))
    got = impl.run_backprop(case.tape)
    difference = compare(want, got)
    if difference is not None and difference.differing and got.status == "ok":
        rows = case.rows_of(index for _, index in difference.differing)
        for kept in running.narrowings(rows, len(case.rows)):
            narrowed = case.narrowed(kept)
            small = Outcome("ok", derivatives=backprop_bits(narrowed.tape))
            again = impl.run_backprop(narrowed.tape)
            if compare(small, again) is not None:
                tape_verdict(tally, narrowed.tape, small, again, narrowed.description)
    tape_verdict(tally, case.tape, want, got, case.description)
