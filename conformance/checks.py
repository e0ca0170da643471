"""What every check does with a case: the reference's outcome, the implementation's, and the
difference between them in words a person can act on."""

from __future__ import annotations

import numpy as np
from hypothesis import assume

import reference
from reference import cases, exact

from .implementation import Implementation, Outcome
from .record import RECORDER

TRANSCENDENTAL = frozenset({"exp2", "log2", "sin"})
# Figures a check measured, printed at the end of the run: name -> text.
SUMMARY: dict[str, str] = {}


def single_op_source(op: str, count: int) -> str:
    """`op` over `count` f32 values of slot 0, stored back: how one op is measured alone."""
    return (f"%a = buffer slot=0 dtype=f32 shape=[{count}]\n%x = load %a\n%y = {op} %x\n"
            "store %a %y\n")


def declared(source: str) -> dict[int, tuple[str, tuple[int, ...]]]:
    return cases.buffer_slots(source)


def expected(source: str, buffers) -> Outcome:
    """The reference's outcome for a case."""
    return reference_impl().run_case(source, buffers, declared(source))


_REFERENCE: list[Implementation] = []


def reference_impl() -> Implementation:
    if not _REFERENCE:
        _REFERENCE.append(Implementation("reference", reference, timeout=0))
    return _REFERENCE[0]


def supported(impl: Implementation, case) -> None:
    """Leave out (as Hypothesis's assume) a case that uses what the implementation says it
    does not support; strategies are also told, so this rarely triggers. Every generated
    case passes here, so this is also where the report counts the cases run per op."""
    assume(not (set(case.features) & impl.unsupported()))
    RECORDER.case(case.features)


def exclusions(impl: Implementation, *, transcendental: bool = False) -> frozenset[str]:
    """What a strategy must not generate for this implementation."""
    out = set(impl.unsupported())
    if transcendental:
        out |= TRANSCENDENTAL
    return frozenset(out)


def difference(want: Outcome, got: Outcome, *, ulps: int = 0) -> str | None:
    """None when the outcomes agree: bit for bit (any NaN matches any NaN, signed zeros
    count), or within `ulps` for f32 when given. Else what differs."""
    if got.status == "failure":
        return f"the implementation misbehaved: {got.message}"
    if want.status != got.status:
        said = f" ({got.message})" if got.message else ""
        return f"expected {want.status}, got {got.status}{said}"
    if want.status != "ok":
        return None
    for slot, w in want.buffers.items():
        g = got.buffers[slot]
        if w.dtype == np.float32:
            wb, gb = w.view(np.uint32).ravel(), g.view(np.uint32).ravel()
            for k, (a, b) in enumerate(zip(wb.tolist(), gb.tolist(), strict=True)):
                if not exact.same_f32(a, b) and (ulps == 0 or exact.is_nan(a) or exact.is_nan(b)
                                                  or exact.ulp_distance(a, b) > ulps):
                    return (f"slot {slot}[{k}]: expected {exact.f32_to_text(a)} (0x{a:08x}), "
                            f"got {exact.f32_to_text(b)} (0x{b:08x}), "
                            f"{exact.ulp_distance(a, b)} ulps apart")
        elif not np.array_equal(w, g):
            k = int(np.flatnonzero(w.ravel() != g.ravel())[0])
            return f"slot {slot}[{k}]: expected {w.ravel()[k]}, got {g.ravel()[k]}"
    return None


def check(impl: Implementation, case, *, ulps: int = 0) -> None:
    """Run a generated case on both; fail with the difference and the program if they differ."""
    want = expected(case.source, case.buffers)
    got = impl.run_case(case.source, case.buffers, declared(case.source))
    problem = difference(want, got, ulps=ulps)
    if problem is not None:
        RECORDER.diverged(case.source, case.buffers, want, got, summary=problem,
                          description=case.description)
    assert problem is None, f"{problem}\n{case.description}\n--- program ---\n{case.source}"
