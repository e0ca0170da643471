"""`python -m conformance replay CASE --impl=X`: rerun one saved case and print the
comparison. SPEC.md, "Replay".

The expectation is the case file's own (`#: out`, `#: error`, `#: run-error`): a saved
divergence replays without the reference, and so does an exported vector.
"""

from __future__ import annotations

import pathlib

import numpy as np

from gradient_conformance.conformance.implementation import Implementation, Outcome
from gradient_conformance.conformance.record import differing_elements
from gradient_conformance.reference import cases, exact
from gradient_conformance.reference.printer import format_trace
from gradient_conformance.reference.tape import load_tape_case


def replay(impl: Implementation, path: str, *, trace: bool = False,
           diagnose: bool = False) -> tuple[bool, str]:
    """(agrees, the comparison as text) for one case file: a program (.ir) or a tape
    (.json). `diagnose`: when it diverges, say which variant of the spec gives the same."""
    if str(path).endswith(".json"):
        return replay_tape(impl, path, diagnose=diagnose)
    case = cases.load_case(path)
    lines = [f"case: {path}", f"implementation: {impl.label} ({impl.spec})"]
    slots = cases.buffer_slots(case.source) if case.error is None else {}
    buffers = cases.initial_buffers(case, slots)
    if case.error is not None:
        want, got = Outcome("rejected", message=case.error), impl.build_only(case.source)
        agrees = got.status == "rejected"
        lines.append(f"expected: rejected ({case.error}); got: {got.status}"
                     + (f" ({got.message})" if got.message else ""))
    elif case.run_error:
        want = Outcome("run-error", index=True)
        got = impl.run_case(case.source, buffers, slots)
        agrees = got.status == "run-error" and got.index
        lines.append(f"expected: a run-time error; got: {got.status}"
                     + (f" ({got.message})" if got.message else ""))
    else:
        want = Outcome("ok", dict(case.outputs))
        got = impl.run_case(case.source, buffers, slots)
        agrees = _compare_slots(case, slots, want, got, lines)
    if trace:
        from gradient_conformance import reference
        lines.append("the reference's walk:")
        lines.append(format_trace(reference.compile_program(case.source)).rstrip())
    if diagnose and not agrees:
        from gradient_conformance.conformance.diagnosis import diagnose_case
        lines.append(diagnose_case(case.source, buffers, want, got).line())
    return agrees, "\n".join([*lines, _verdict(agrees)])


def _compare_slots(case, slots, want: Outcome, got: Outcome, lines: list[str]) -> bool:
    """Whether every expected slot agrees (and every `#: near` one is near), saying so."""
    if got.status != "ok":
        lines.append(f"expected: ok; got: {got.status} ({got.message})")
        return False
    elements, _ = differing_elements(want, got)
    for slot, w in sorted(want.buffers.items()):
        bad = sum(1 for e in elements if e.slot == slot)
        lines.append(f"slot {slot} ({slots[slot][0]}{list(w.shape)}): "
                     + ("every element agrees" if not bad else f"{bad} elements differ"))
    if elements:
        lines.append(f"{'element':>12}  {'expected':>16} {'bits':>10}  {'actual':>16} "
                     f"{'bits':>10}  ulps")
        for e in elements:
            lines.append(f"{f'{e.slot}[{e.index}]':>12}  {e.expected:>16} {e.expected_bits:>10}"
                         f"  {e.actual:>16} {e.actual_bits:>10}  "
                         f"{'-' if e.ulps is None else e.ulps}")
    far = 0
    for slot, near in sorted(case.near.items()):
        mine = np.asarray(got.buffers[slot], np.float64)
        close = bool(np.all(np.abs(mine - near) <= 1e-5 + 1e-4 * np.abs(near)))
        lines.append(f"slot {slot}: {'near' if close else 'not near'} the expected "
                     f"{near.ravel().tolist()} (got {mine.ravel().tolist()})")
        far += not close
    return not elements and not far


def replay_tape(impl: Implementation, path: str, *, diagnose: bool = False
                ) -> tuple[bool, str]:
    case = load_tape_case(pathlib.Path(path).read_text())
    lines = [f"case: {path}", f"implementation: {impl.label} ({impl.spec})"]
    got = impl.run_backprop(case["tape"])
    if case["error"] is not None:
        want, agrees = Outcome("rejected", message=case["error"]), got.status == "rejected"
        lines.append(f"expected: rejected ({case['error']}); got: {got.status}"
                     + (f" ({got.message})" if got.message else ""))
    elif got.status != "ok":
        want, agrees = Outcome("ok", derivatives=case["derivatives"]), False
        lines.append(f"expected: derivatives; got: {got.status} ({got.message})")
    else:
        want, bad = Outcome("ok", derivatives=case["derivatives"]), 0
        lines.append(f"{'entry':>6}  {'expected':>16} {'bits':>10}  {'actual':>16} "
                     f"{'bits':>10}  ulps")
        for k, (a, b) in enumerate(zip(case["derivatives"], got.derivatives, strict=True)):
            same = exact.same_f32(a, b)
            bad += not same
            lines.append(f"{k:>6}  {exact.f32_to_text(a):>16} 0x{a:08x}  "
                         f"{exact.f32_to_text(b):>16} 0x{b:08x}  "
                         f"{'' if same else exact.ulp_distance(a, b)}"
                         f"{'' if same else '  <- differs'}")
        agrees = not bad
    if diagnose and not agrees:
        from gradient_conformance.conformance.diagnosis import diagnose_tape
        lines.append(diagnose_tape(case["tape"], want, got).line())
    return agrees, "\n".join([*lines, _verdict(agrees)])


def _verdict(agrees: bool) -> str:
    return "AGREES with the expectation" if agrees else "DIVERGES from the expectation"
