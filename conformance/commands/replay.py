"""`python -m conformance replay CASE --impl=X`: rerun one saved case and print the
comparison. docs/commands.md, "Replay".

The expectation is the case file's own (`#: out`, `#: error`, `#: run-error`): a saved
divergence replays without the reference, and so does an exported vector.
"""

from __future__ import annotations

import numpy as np

from gradient_conformance.conformance.casefiles import check_mentions
from gradient_conformance.conformance.commands.suite import confinement_of, load_implementation
from gradient_conformance.conformance.findings import Diverged
from gradient_conformance.conformance.options import add_containment
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.conformance.running import (
    bits_are_the_point,
    claimed,
    compare_claims,
    traps,
)
from gradient_conformance.conformance.tallies import STATUS, TRUTH, Tally
from gradient_conformance.reference import cases, exact
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.ops import TRANSCENDENTAL
from gradient_conformance.reference.printer import format_trace
from gradient_conformance.reference.tape import load_tape_case
from gradient_conformance.reports.records import visible


def replay(impl, path: str, *, trace: bool = False,
           diagnose: bool = False) -> tuple[bool | None, str]:
    """(agrees, the comparison as text) for one case file: a program (.ir) or a tape
    (.json); agrees is None where nothing was left to compare (the case-file check skips
    it). `diagnose`: when it diverges, say which variant of the spec gives the same."""
    if str(path).endswith(".json"):
        return replay_tape(impl, path, diagnose=diagnose)
    try:
        case = cases.load_case(path)
        if case.error is None:  # its buffers' sizes, before anything is allocated
            cases.buffer_slots(case.source)
    except IRError as problem:
        raise ValueError(f"{path}: {problem}") from None
    reading = Reading(case.source)
    lines = [f"case: {path}", f"implementation: {impl.label} ({impl.spec})"]
    if case.error is None and not case.run_error and not case.outputs and not case.near:
        lines.append(_expect_the_reference(case, reading))
    slots = reading.slots if case.error is None else {}
    buffers = cases.initial_buffers(case, slots)
    if case.error is not None:
        want, got = Outcome("rejected", message=case.error), impl.build_only(case.source)
        lines.append(f"expected: rejected ({case.error}); got: {got.status}"
                     + (f" ({got.message})" if got.message else ""))
    elif case.run_error:
        want = Outcome("run-error", index=True)
        got = impl.run_case(case.source, buffers, slots)
        lines.append(f"expected: a run-time error; got: {got.status}"
                     + (f" ({got.message})" if got.message else ""))
    else:
        trapping = traps(impl, reading, buffers)
        if trapping:
            raise ValueError(f"{path} reaches {', '.join(sorted(trapping))}, where {impl.label} "
                             "declares that integer division traps: the suite does not send "
                             "it such a run")
        want = Outcome("ok", dict(case.outputs))
        got = impl.run_case(case.source, buffers, slots)
    # As the checks compare: within the ulps declared for the ops it uses, and a gradient's
    # bits only where the implementation claims them (else against the true derivative).
    ulps = max((impl.ulps(op) for op in reading.features & TRANSCENDENTAL), default=0)
    if ulps:
        lines.append(f"compared within the {ulps} ulps declared for "
                     f"{', '.join(sorted(reading.features & TRANSCENDENTAL))}")
    whole, expected = got, want
    want, got, left_out = claimed(impl, reading, want, got)
    difference = compare(want, got, ulps=ulps)
    # The comparison the case-file check makes (running.compare_claims), on a tally of its
    # own: what it compared, and the first divergence it found.
    tally, far = _compared(impl, path, case, reading, buffers, expected, whole, ulps)
    if far is not None and far.difference is not None and far.difference.kind == "message":
        lines.append(far.summary)
    agreeing = far is None and (expected.status == "ok" or difference is None)
    agrees: bool | None = agreeing and _near(case, got, lines)
    unclaimed = _unclaimed(left_out, expected, whole, far, tally, ulps, lines) \
        if left_out and whole.status == "ok" else None
    for why, count in tally.left_out.items():
        lines.append(f"left out, {count} outputs: {why}")
    if agreeing and not tally.ledger and not case.near:
        lines.append("nothing left to compare, as the case-file check skips it")
        agrees = None
    if want.status == "ok":
        _slot_lines(slots, want, got, difference, lines)
    if trace:
        lines.append("the reference's walk:")
        lines.append(format_trace(reading.program()).rstrip())
    if diagnose and (agrees is False or unclaimed is not None):
        lines += _explained(impl, case, reading, buffers, want, whole)
    return agrees, "\n".join([*lines, _verdict(agrees)])


def _explained(impl, case, reading: Reading, buffers, want: Outcome, got: Outcome) -> list[str]:
    """The diagnosis and location of a case file's divergence, as lines."""
    from gradient_conformance.conformance.explain import explain_finding
    from gradient_conformance.conformance.findings import Finding, ProgramCase
    if want.status == "ok" and got.status == "ok":
        # Explained against the reference's own outcome on every slot: the case file
        # may expect some of them only.
        want = reading.outcome(buffers)
    diagnosis, location = explain_finding(Finding(
        "", want, got, ProgramCase(reading, buffers),
        rule=case.error if case.error != "any" else None), impl)
    return [diagnosis.line(), location.text()]


def _compared(impl, path, case, reading: Reading, buffers, expected: Outcome, got: Outcome,
              ulps: int):
    """(the tally of what was compared, the divergence found or None), as the case-file
    check compares (running.compare_claims, casefiles.check_mentions); a rejection or a
    run-time error by its status, a rejection's message by the lines it must give."""
    tally = Tally()
    if expected.status != "ok":
        tally.compared(STATUS, 1)
        if expected.status == "rejected" and got.status == "rejected":
            try:
                check_mentions(impl, tally, case, reading, got, "")
            except Diverged as diverged:
                return tally, diverged.finding
        return tally, None
    try:
        compare_claims(impl, tally, reading, buffers, expected, got, ulps=ulps,
                       bits_are_the_point=bits_are_the_point(path))
    except Diverged as diverged:
        return tally, diverged.finding
    return tally, None


def _expect_the_reference(case, reading: Reading) -> str:
    """A program with no `#:` expectation (docs/commands.md, "Replay"): the reference's own
    outcome on it, from its `#: in` lines and zeros, made the case's expectation; what it
    is, in words."""
    said = "the file has no `#: out`, `#: error` or `#: run-error` line: compared with the " \
        "reference's outcome on it, "
    slots = reading.slots if reading.error is None else {}
    want = reading.outcome(cases.initial_buffers(case, slots))
    if want.status == "rejected":
        case.error = "any"
        return said + f"a rejection ({want.message})"
    if want.status == "run-error":
        case.run_error = True
        return said + f"a run-time error ({want.message})"
    case.outputs = dict(want.buffers)
    return said + f"the final contents of slots {sorted(want.buffers)}"


def _unclaimed(left_out, expected: Outcome, whole: Outcome, far, tally: Tally, ulps: int,
               lines: list[str]):
    """What was said of the slots whose bits the implementation does not claim: beside the
    truth (from the comparison's tally and its divergence, `far`), and the file's bits shown,
    not judged. Returns the difference from those bits, if any."""
    if far is not None and far.comparison == "truth":
        lines.append(f"slots {left_out}: made from a gradient, whose bits the implementation "
                     "does not claim; compared with the true derivative, as the derivative "
                     f"check does: {far.summary}")
    elif TRUTH in tally.ledger:
        lines.append(f"slots {left_out}: made from a gradient, whose bits the implementation "
                     "does not claim; compared with the true derivative, as the derivative "
                     "check does: within the bound of the truth")
    unclaimed = compare(Outcome("ok", {s: expected.buffers[s] for s in left_out}),
                        Outcome("ok", {s: whole.buffers[s] for s in left_out
                                       if s in whole.buffers}), ulps=ulps)
    if unclaimed is not None:
        lines.append(f"the bits of slots {left_out}, which it does not claim, are not the "
                     f"file's: {unclaimed}")
    return unclaimed


def _slot_lines(slots, want: Outcome, got: Outcome, difference, lines: list[str]) -> None:
    """Each expected slot, whether it agrees, and the differing elements."""
    if got.status != "ok" or (difference is not None and not difference.differing):
        lines.append(f"expected: ok; got: {got.status}"
                     + (f" ({difference})" if difference else ""))
        return
    elements = difference.elements if difference else []
    for slot, w in sorted(want.buffers.items()):
        bad = sum(1 for s, _ in (difference.differing if difference else ()) if s == slot)
        lines.append(f"slot {slot} ({slots[slot][0]}{list(w.shape)}): "
                     + ("every element agrees" if not bad else f"{bad} elements differ"))
    if elements:
        lines.append(f"{'element':>12}  {'expected':>16} {'bits':>10}  {'actual':>16} "
                     f"{'bits':>10}  ulps")
        for e in elements:
            lines.append(f"{f'{e.slot}[{e.index}]':>12}  {e.expected:>16} {e.expected_bits:>10}"
                         f"  {e.actual:>16} {e.actual_bits:>10}  "
                         f"{'-' if e.ulps is None else e.ulps}")


def _near(case, got: Outcome, lines: list[str]) -> bool:
    """Whether every `#: near` slot is near what it should be, saying so."""
    far = 0
    for slot, near in sorted(case.near.items()):
        mine = np.asarray(got.buffers[slot], np.float64)
        close = bool(np.all(np.abs(mine - near) <= 1e-5 + 1e-4 * np.abs(near)))
        lines.append(f"slot {slot}: {'near' if close else 'not near'} the expected "
                     f"{near.ravel().tolist()} (got {mine.ravel().tolist()})")
        far += not close
    return not far


def replay_tape(impl, path: str, *, diagnose: bool = False) -> tuple[bool, str]:
    case = load_tape_case(cases.read_file(path))
    lines = [f"case: {path}", f"implementation: {impl.label} ({impl.spec})"]
    got = impl.run_backprop(case["tape"])
    want = (Outcome("rejected", message=case["error"]) if case["error"] is not None else
            Outcome("ok", derivatives=case["derivatives"]))
    difference = compare(want, got)
    if want.status == "rejected":
        lines.append(f"expected: rejected ({case['error']}); got: {got.status}"
                     + (f" ({got.message})" if got.message else ""))
    elif got.status != "ok":
        lines.append(f"expected: derivatives; got: {got.status} ({got.message})")
    else:
        differing = {k for _, k in difference.differing} if difference else set()
        lines.append(f"{'entry':>6}  {'expected':>16} {'bits':>10}  {'actual':>16} "
                     f"{'bits':>10}  ulps")
        for k, (a, b) in enumerate(zip(want.derivatives, got.derivatives, strict=False)):
            lines.append(f"{k:>6}  {exact.f32_to_text(a):>16} 0x{a:08x}  "
                         f"{exact.f32_to_text(b):>16} 0x{b:08x}  "
                         + (f"{exact.ulp_distance(a, b)}  <- differs" if k in differing
                            else ""))
    agrees = difference is None
    if diagnose and not agrees:
        from gradient_conformance.conformance.explain import explain_finding
        from gradient_conformance.conformance.findings import Finding, TapeCase
        diagnosis, location = explain_finding(Finding("", want, got, TapeCase(case["tape"])),
                                              impl)
        lines += [diagnosis.line(), location.text()]
    return agrees, "\n".join([*lines, _verdict(agrees)])


def _verdict(agrees: bool | None) -> str:
    if agrees is None:
        return "NOT COMPARED: nothing of this case file is compared for this implementation"
    return "AGREES with the expectation" if agrees else "DIVERGES from the expectation"


def add_parser(commands) -> None:
    parser = commands.add_parser("replay", help="rerun one case file and print the comparison")
    parser.add_argument("case")
    parser.add_argument("--impl", required=True)
    parser.add_argument("--trace", action="store_true", help="print the reference's walk too")
    parser.add_argument("--diagnose", action="store_true", help="when it diverges, name the "
                        "variant of the spec that gives the same")
    parser.add_argument("--case-timeout", type=float, default=20.0)
    add_containment(parser.add_argument, "--")


def run(args) -> int:
    impl = load_implementation(args.impl, args.case_timeout, confinement_of(args))
    try:
        agrees, text = replay(impl, args.case, trace=args.trace, diagnose=args.diagnose)
    finally:
        impl.close()
    # What the case file and the implementation said, escapes shown, never run by the terminal.
    print(visible(text))
    # Nothing compared is neither agreement nor divergence: the status of a usage problem.
    return 2 if agrees is None else 0 if agrees else 1

