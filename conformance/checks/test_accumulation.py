"""Accumulation order: shares are summed as a left fold in arrival order, and programs whose
f32 sum depends on the order tell. When an implementation gets other bits, the failure names
the order it used. SPEC.md, "The walk"."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance.checks.compare import declared, expected, supported
from gradient_conformance.conformance.record import RECORDER
from gradient_conformance.generators import order_sensitive_gradients
from gradient_conformance.generators.strategies import arrival_order
from gradient_conformance.reference import exact


def _pairwise(bits):
    while len(bits) > 1:
        bits = [exact.f32_add(bits[k], bits[k + 1]) if k + 1 < len(bits) else bits[k]
                for k in range(0, len(bits), 2)]
    return bits[0]


def orders(case) -> dict[str, int]:
    """The gradient each plausible order of summing the shares gives."""
    constants = [int(b) for b in case.buffers[1].view(np.uint32)]
    arrival = arrival_order(case.source)
    return {
        "arrival order (the spec's)": exact.f32_fold([constants[k] for k in arrival]),
        "program order": exact.f32_fold(constants),
        "reversed arrival order": exact.f32_fold([constants[k] for k in reversed(arrival)]),
        "reversed program order": exact.f32_fold(constants[::-1]),
        "pairwise in arrival order": _pairwise([constants[k] for k in arrival]),
    }


@given(data=st.data())
def test_shares_are_summed_in_arrival_order(impl, data):
    case = data.draw(order_sensitive_gradients())
    supported(impl, case)
    got = impl.run_case(case.source, case.buffers, declared(case.source))
    if got.status != "ok":
        RECORDER.diverged(case.source, case.buffers, expected(case.source, case.buffers), got,
                          summary=f"{got.status}: {got.message}", description=case.description)
    assert got.status == "ok", f"{got.status}: {got.message}\n{case.source}"
    bits = int(got.buffers[2].view(np.uint32))
    candidates = orders(case)
    want = candidates["arrival order (the spec's)"]
    if not exact.same_f32(bits, want):
        matches = [name for name, b in candidates.items() if exact.same_f32(bits, b)]
        used = " or ".join(matches) if matches else "no order we know"
        RECORDER.diverged(case.source, case.buffers, expected(case.source, case.buffers), got,
                          summary=f"the shares were summed in {used}",
                          description=case.description)
        raise AssertionError(f"expected {exact.f32_to_text(want)}, got "
                             f"{exact.f32_to_text(bits)}: the shares were summed in {used}\n"
                             f"{case.description}\n--- program ---\n{case.source}")
