"""Rejection: every invalid gradient raises at build, with whatever message; every near miss
builds and runs like the reference. SPEC.md, "When gradient is rejected"."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance import findings, readings, running, tallies
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.generators import invalid_gradients, near_misses
from gradient_conformance.reference.ops import TRANSCENDENTAL

RANK = 2  # where the suite runs these checks (plugin.rank): cheaper, more telling first


@given(data=st.data())
def test_invalid_gradients_are_rejected(impl, tally, data):
    """Generated gradients the spec rejects, one rule each: rejected at build."""
    case = data.draw(invalid_gradients())
    running.supported(impl, case, tally)
    want, got = Outcome("rejected"), impl.build_only(case.source)
    reading = readings.Reading(case.source, case.parsed)
    tally.reach(reading)
    tally.compared(tallies.STATUS, 1)
    difference = compare(want, got)
    if difference is not None:
        raise tally.diverged(findings.Finding(
            f"the rule [{case.expect_error}] was missed: {difference}", want, got,
            findings.ProgramCase(reading, case.buffers), difference, case.description,
            rule=case.expect_error))


@given(data=st.data())
def test_near_misses_are_accepted(impl, tally, data):
    """Generated programs a step away from a rejection rule: accepted, with the spec's values."""
    case = data.draw(near_misses())
    running.supported(impl, case, tally)
    inexact = any(impl.ulps(op) for op in TRANSCENDENTAL)
    # Without the bit_exact_gradients claim, check_case compares the slots not made from a
    # gradient, and the status.
    if set(case.features) & TRANSCENDENTAL and inexact:
        # Values within the declared ulps compound through a program: only the acceptance
        # is compared.
        reading = readings.Reading(case.source)
        running.verdict(tally, reading, case.buffers, Outcome("ok"),
                impl.run_case(case.source, case.buffers, reading.slots),
                description=case.description)
        return
    running.check_case(impl, tally, case)


def test_exclusions_leave_out_what_is_unsupported(impl):
    """The generators leave out everything the implementation declares unsupported."""
    assert running.exclusions(impl) >= set(impl.unsupported())
