"""What every check does with a case: the reference's outcome, the implementation's, and the
difference between them in words a person can act on."""

from __future__ import annotations

import numpy as np
from hypothesis import assume

from gradient_conformance import reference
from gradient_conformance.conformance.implementation import Implementation, Outcome
from gradient_conformance.conformance.record import RECORDER, f32_agree
from gradient_conformance.generators.buffers import POISON, output_only_slots, poisoned
from gradient_conformance.reference import cases, exact
from gradient_conformance.reference.errors import IndexOutOfRange

TRANSCENDENTAL = frozenset({"exp2", "log2", "sin"})


def single_op_source(op: str, count: int) -> str:
    """`op` over `count` f32 values of slot 0, stored back: how one op is measured alone."""
    return (f"%a = buffer slot=0 dtype=f32 shape=[{count}]\n%x = load %a\n%y = {op} %x\n"
            "store %a %y\n")


def declared(source: str) -> dict[int, tuple[str, tuple[int, ...]]]:
    return cases.buffer_slots(source)


def expected(source: str, buffers, semantics=reference.SPEC, *,
             build_only: bool = False) -> Outcome:
    """The reference's outcome for a case (under `semantics`, the spec's by default; only
    built, when `build_only`). The oracle is trusted and called directly: only its IRErrors
    are answers; anything else it raises is a bug of the suite's, and ends the check as an
    error rather than be blamed on the implementation."""
    try:
        run = reference.build(source, semantics)
    except reference.IRError as problem:
        return Outcome("rejected", message=str(problem))
    if build_only:
        return Outcome("ok")
    try:
        final = run({slot: array.copy() for slot, array in buffers.items()})
    except IndexOutOfRange as problem:
        return Outcome("run-error", message=str(problem), index=True)
    return Outcome("ok", buffers=final)


def case_file_buffers(case, slots) -> dict:
    """A case file's initial contents: its `#: in` lines, zeros for the other slots it
    loads, and POISON for a slot it only stores into (generators/buffers.py says why)."""
    buffers = cases.initial_buffers(case, slots)
    stored_only = output_only_slots(case.source) - set(case.inputs)
    return {slot: poisoned(slots[slot]) if slot in stored_only else array
            for slot, array in buffers.items()}


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
    """None when the outcomes agree: the same status (a run-time error blaming an index, as
    the reference's does), and every f32 element agreeing (f32_agree, within `ulps` when
    given), every other element equal. Else what differs, in words a person can act on."""
    if got.status == "failure":
        return f"the implementation misbehaved: {got.message}"
    if want.status != got.status:
        said = f" ({got.message})" if got.message else ""
        return f"expected {want.status}, got {got.status}{said}"
    if want.status == "run-error" and not got.index:
        return ("expected a run-time error for an index out of range; the run failed, but "
                f"not blaming an index: {got.message}")
    if want.status != "ok":
        return None
    for slot, w in want.buffers.items():
        g = got.buffers[slot]
        if w.dtype == np.float32:
            wb, gb = w.view(np.uint32).ravel(), g.view(np.uint32).ravel()
            for k, (a, b) in enumerate(zip(wb.tolist(), gb.tolist(), strict=True)):
                if not f32_agree(a, b, ulps):
                    left = " (its initial contents, left unchanged)" if b == POISON else ""
                    return (f"slot {slot}[{k}]: expected {exact.f32_to_text(a)} (0x{a:08x}), "
                            f"got {exact.f32_to_text(b)} (0x{b:08x}){left}, "
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
