"""Rejection: every invalid gradient raises at build, with whatever message; every near miss
builds and runs like the reference. SPEC.md, "When gradient is rejected"."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance.checks.compare import (
    TRANSCENDENTAL,
    check,
    declared,
    exclusions,
    supported,
)
from gradient_conformance.conformance.implementation import Outcome
from gradient_conformance.conformance.record import RECORDER
from gradient_conformance.generators import invalid_gradients, near_misses


@given(data=st.data())
def test_invalid_gradients_are_rejected(impl, data):
    case = data.draw(invalid_gradients())
    supported(impl, case)
    outcome = impl.build_only(case.source)
    if outcome.status != "rejected":
        RECORDER.diverged(case.source, case.buffers, Outcome("rejected"), outcome,
                          summary=f"the rule [{case.expect_error}] was missed",
                          description=case.description, rule=case.expect_error)
    assert outcome.status == "rejected", (
        f"the rule [{case.expect_error}] was missed: {case.description}; "
        f"build {outcome.status} {outcome.message}\n--- program ---\n{case.source}")


@given(data=st.data())
def test_near_misses_are_accepted(impl, data):
    case = data.draw(near_misses())
    supported(impl, case)
    if set(case.features) & TRANSCENDENTAL and any(impl.ulps(op) for op in TRANSCENDENTAL):
        got = impl.run_case(case.source, case.buffers, declared(case.source))
        assert got.status == "ok", f"{case.description}: {got.status} {got.message}\n{case.source}"
        return
    check(impl, case)


def test_exclusions_leave_out_what_is_unsupported(impl):
    assert exclusions(impl) >= set(impl.unsupported())
