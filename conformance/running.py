"""What the generated checks share, the checks' kit: how a check runs a case (`supported`,
`exclusions`, `run_both`, `verdict`, `check_case`, `check_enumerated`), what an implementation
claims and how it is compared (`claimed`, `compare_claims`, `against_the_truth`), and the values
over every set of axes. docs/suite.md, "The conformance suite". A case's reading is in
readings.py, what a check found in findings.py, what it measured in tallies.py, the true
derivative in true_derivative.py, and case files in casefiles.py."""

from __future__ import annotations

import functools
import math
import pathlib

import numpy as np
from hypothesis import assume

from gradient_conformance.conformance.findings import Finding, ProgramCase
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.readings import Reading, made_by_gradients, rejected_as
from gradient_conformance.conformance.tallies import PROPAGATED, Tally, count_compared
from gradient_conformance.conformance.true_derivative import KINK, near_the_truth
from gradient_conformance.reference import exact
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.ops import (
    TRANSCENDENTAL,
    TRAPS,
)
from gradient_conformance.reference.program import (
    Program,
    cone,
    stores,
)


def supported(impl, case, tally: Tally) -> None:
    """Leave out (as Hypothesis's assume) a case that uses what the implementation says it
    does not support; strategies are also told, so this rarely triggers. Every generated
    case passes here, so this is also where the cases run per op are counted."""
    assume(not (set(case.features) & impl.unsupported()))
    if any(":" in f for f in impl.unsupported()):  # ops by dtype: known once it is built
        assume(not (Reading(case.source, case.parsed).uses & impl.unsupported()))
    tally.case(case.features)


def exclusions(impl, *, transcendental: bool = False, bits: bool = False) -> frozenset[str]:
    """What a strategy must not generate for this implementation: what it does not
    support; exp2, log2 and sin, for a check that compares them bit for bit where it
    declares ulps (`transcendental`); gradients, for a check that compares bits (`bits`)
    where it does not claim bit-exact gradients (their values are the derivative check's)."""
    gradients = bits and not impl.capabilities.get("bit_exact_gradients", True)
    return frozenset(set(impl.unsupported()) | (TRANSCENDENTAL if transcendental else set())
                     | ({"gradient"} if gradients else set()))


def run_both(impl, source: str, buffers, statements=(), *, built: Program | None = None,
             tally: Tally | None = None) -> tuple[Reading, Outcome, Outcome]:
    """The program read (from `statements` and the spec's build of them, when the case was
    drawn with them), the reference's outcome on it, and the implementation's. With the
    check's `tally`, the conditions are measured only while it counts cases (not while
    Hypothesis shrinks)."""
    reading = Reading(source, statements, measure=tally is None or tally.measuring,
                      built=built)
    if why := unsupported_by(impl, reading):
        _leave_out(why)
    want = reading.outcome(buffers)
    if why := trapped_by(impl, reading, buffers) or beyond_limits(want):
        _leave_out(why)
    return reading, want, impl.run_case(source, buffers, reading.slots)


def beyond_limits(want: Outcome) -> str:
    """Why the suite sends no such program ("" when it does): the reference rejects it for
    one of its own limits, which the course's text does not set (SPEC.md, "Limits"), so no
    expectation rests on it."""
    return (f"the reference rejects it for one of its own limits, which the course's text "
            f"does not set (SPEC.md, \"Limits\"): {want.message}") \
        if want.reason == "limit" else ""


def unsupported_by(impl, reading: Reading) -> str:
    """Why the suite sends no such program ("" when it does): it uses an op, or an op at a
    dtype, the implementation declares unsupported (CAPABILITIES)."""
    unsupported = reading.uses & impl.unsupported()
    return (f"it uses {sorted(unsupported)}, which the implementation declares unsupported "
            "(CAPABILITIES)") if unsupported else ""


def trapped_by(impl, reading: Reading, buffers) -> str:
    """Why the suite sends no such run ("" when it does): it reaches a division the
    implementation declares traps (`traps`)."""
    trapping = traps(impl, reading, buffers)
    return (f"it reaches {', '.join(sorted(trapping))}, where the implementation declares "
            "that integer division traps (CAPABILITIES)") if trapping else ""


def _skip(why: str):
    import pytest
    pytest.skip(why)


def _leave_out(why: str):
    """A case not sent: a drawn one rejected (Hypothesis draws another), a fixed one (not
    drawn by Hypothesis, whose assume there is deprecated) skipped, saying `why`."""
    from hypothesis import reject
    from hypothesis.control import currently_in_test_context
    if currently_in_test_context():
        reject()
    _skip(why)


def traps(impl, reading: Reading, buffers) -> frozenset[str]:
    """For an implementation whose integer division traps (CAPABILITIES), the conditions of
    this run it would trap at: a divisor of zero, or -2^31 over -1. The suite sends no such
    run (SPEC.md, "The protocol"), and says so."""
    if not getattr(impl, "capabilities", {}).get("integer_division_traps", False):
        return frozenset()
    return reading.conditions(buffers) & TRAPS


def verdict(tally: Tally, reading: Reading, buffers, want: Outcome, got: Outcome, *,
            ulps: int = 0, description: str = "", context: str = "",
            counted: bool = True) -> None:
    """Raise Diverged unless the outcomes agree (compare, within `ulps`); `context` opens
    the summary. What it compared goes on the tally's ledger (unless not `counted`): each
    element of the expected slots, or the status alone."""
    tally.reach(reading, buffers)
    if counted:
        count_compared(tally, want, ulps)
    difference = compare(want, got, ulps=ulps)
    if difference is not None:
        # A rejection missed is about the rule (or kind) the reference rejects it by, as the
        # rejection check's findings are: the reducer keeps it, the signature names it.
        missed = want.status == "rejected" and got.status != "rejected"
        rule = (rejected_as(reading) or None) if missed else None
        raise tally.diverged(Finding(f"{context}{difference}", want, got,
                                     ProgramCase(reading, buffers), difference, description,
                                     rule=rule, ulps=ulps))


def check_case(impl, tally: Tally, case, *, ulps: int = 0) -> None:
    """A generated case on both; Diverged if they differ (in what the implementation
    claims: `claimed`; within `ulps` only where a slot holds an op's own results, and
    within the bound they propagate where it is computed from them: beyond_the_op)."""
    reading, want, got = run_both(impl, case.source, case.buffers, case.parsed,
                                   built=case.built, tally=tally)
    whole, whole_got = want, got
    want, got, left_out = claimed(impl, reading, want, got)
    if left_out:
        tally.leave_out(UNCLAIMED, sum(int(whole.buffers[s].size) for s in left_out))
    beyond = beyond_the_op(reading, want, ulps)
    kept_want, kept_got = _without(want, beyond), _without(got, beyond)
    verdict(tally, reading, case.buffers, kept_want, kept_got, ulps=ulps,
            description=case.description,
            counted=not (beyond and not kept_want.buffers) or got.status != want.status)
    if beyond and whole_got.status == "ok":
        within_the_propagated_bound(impl, tally, reading, case.buffers, whole, whole_got,
                                    beyond, case.description)


def narrowings(differing: list[int], rows: int) -> list[list[int]]:
    """The narrowed cases an enumerated case's divergence is tried on, of its `rows` rows:
    the first row that differs, then every one that does (neither when it is the whole)."""
    tries = [differing[:1]] if rows > 1 else []
    if 1 < len(differing) < rows:
        tries.append(differing)
    return tries


def check_enumerated(impl, tally: Tally, case, *, ulps: int = 0) -> None:
    """An enumerated case (generators/enumerations.py) on both, compared as a case file is
    (`compare_claims`). Where the outputs differ, the divergence reported is the case
    narrowed to the first combination that differs, run again (and if that alone does not
    differ, to every one that does): a program of one element per buffer (or one pair of
    statements), compared in what the implementation claims (`claimed`), which the failure
    stage reduces and explains at the cost of a drawn one. Only when neither narrowed
    program differs (the difference needs the other elements) is the whole case the
    divergence. docs/generators.md, "Enumerations"."""
    buffers = case.buffers
    reading, want, got = run_both(impl, case.source, buffers, tally=tally)
    claimed_want, claimed_got, _ = claimed(impl, reading, want, got)
    beyond = beyond_the_op(reading, claimed_want, ulps)
    difference = compare(_without(claimed_want, beyond), _without(claimed_got, beyond),
                         ulps=ulps)
    if difference is not None and difference.differing:
        combinations = case.combinations_of(difference.differing)
        for kept in narrowings(combinations, len(case.rows)):
            narrowed = case.narrowed(kept)
            small = narrowed.buffers
            n_reading, n_want, n_got = run_both(impl, narrowed.source, small, tally=tally)
            n_want_claimed, n_got_claimed, _ = claimed(impl, n_reading, n_want, n_got)
            n_beyond = beyond_the_op(n_reading, n_want_claimed, ulps)
            if compare(_without(n_want_claimed, n_beyond), _without(n_got_claimed, n_beyond),
                       ulps=ulps) is not None:
                compare_claims(impl, tally, n_reading, small, n_want, n_got, ulps=ulps,
                               description=(f"{narrowed.description} (the whole case differs "
                                            f"at {len(combinations)} of {len(case.rows)})"))
    compare_claims(impl, tally, reading, buffers, want, got, ulps=ulps,
                   description=case.description)


UNCLAIMED = ("made from a gradient, whose bits the implementation does not claim: the "
             "derivative check compares such values with the true derivative")


def claimed(impl, reading: Reading, want: Outcome, got: Outcome) \
        -> tuple[Outcome, Outcome, list[int]]:
    """Both outcomes cut to what the implementation claims: without the bit_exact_gradients
    claim, the slots made from a gradient are left out (their values are the derivative
    check's); the status is compared whatever is left. Also the slots left out."""
    if impl.capabilities.get("bit_exact_gradients", True) or want.status != "ok":
        return want, got, []
    left_out = sorted(made_by_gradients(reading) & set(want.buffers))
    if not left_out:
        return want, got, []

    def cut(outcome: Outcome) -> Outcome:
        if outcome.status != "ok":
            return outcome
        return Outcome("ok", {s: a for s, a in outcome.buffers.items() if s not in left_out})
    return cut(want), cut(got), left_out


@functools.cache
def _bit_exact_files() -> frozenset[str]:
    """The package's case files whose point is the bits of a gradient (a rule's op form, a
    sum's order), by their path within the cases: cases/bit_exact_gradients.txt."""
    from gradient_conformance import resource
    lines = (resource("cases") / "bit_exact_gradients.txt").read_text().splitlines()
    return frozenset(line.split("#")[0].strip() for line in lines if line.split("#")[0].strip())


def bits_are_the_point(path) -> bool:
    """Whether `path` is one of the package's case files whose point is a gradient's bits."""
    from gradient_conformance import resource
    try:
        name = pathlib.Path(path).resolve().relative_to(resource("cases").resolve())
    except ValueError:  # not one of the package's files
        return False
    return name.as_posix() in _bit_exact_files()


BITS_ARE_THE_POINT = (
    "made from a gradient, whose bits the implementation does not claim, in a case file "
    "whose point is those bits (a rule's op form, a sum's order): another order or form, "
    "which the implementation may use, can be far from the true derivative there")


BEYOND_THE_OP = ("computed from the results of an op whose error the implementation bounds "
                 "in ulps, not those results themselves: compared with the true value, since "
                 "the op's ulps bound only its own results")


def beyond_the_op(reading: Reading, want: Outcome, ulps: int) -> list[int]:
    """The f32 slots, where the check allows `ulps` for the transcendental ops the program
    uses, whose values are computed from such an op's results but are not only those
    results (each store into the slot a transcendental op's result, from operands that
    involve none): declared ulps bound the op's own results, and what follows from them is
    compared with the true value instead (issue 53: a claim of 1 ulp for sin failed by 2 ulps
    in its gradient, g * sin(a + pi/2)). docs/suite.md, "What a pass compared"."""
    if not ulps or want.status != "ok":
        return []
    try:
        program = reading.program()
    except IRError:
        return []
    every = stores(program)
    found = []
    for slot in sorted(want.buffers):
        buffer = program.buffers.get(slot)
        if buffer is None or buffer.dtype != "f32":
            continue
        nodes, _ = cone(program, slot)
        transcendental = {n for n in nodes if n.op in TRANSCENDENTAL}
        if not transcendental:
            continue
        own = [s for s in every if s.buffer is buffer]
        if own and all(s.index is None for s in own) and \
                transcendental == {s.value for s in own}:
            continue
        found.append(slot)
    return found


def _without(outcome: Outcome, slots) -> Outcome:
    if outcome.status != "ok" or not slots:
        return outcome
    return Outcome("ok", {s: a for s, a in outcome.buffers.items() if s not in slots})


def compare_claims(impl, tally, reading, buffers, want: Outcome, got: Outcome, *,
                   ulps: int = 0, description: str = "", bits_are_the_point: bool = False
                   ) -> list[int]:
    """`got` beside `want` as the implementation's claims allow (docs/suite.md, "What a
    pass compared"): the slots it claims by `verdict` (bit for bit, or within `ulps`), the
    slots made from a gradient, without the bit-exact claim, against the true derivative
    (`against_the_truth`), unless `bits_are_the_point` of the file, where they are left
    out, saying why. Diverged if they differ; else the slots whose bits were not compared.
    The one comparison of a case file, for its check and for `replay`."""
    whole_want, whole_got = want, got
    want, got, left_out = claimed(impl, reading, want, got)
    beyond = beyond_the_op(reading, want, ulps)
    want, got = _without(want, beyond), _without(got, beyond)
    # Every slot left out: the status alone is not what a program with outputs is about,
    # unless it differs.
    verdict(tally, reading, buffers, want, got, ulps=ulps, description=description,
            counted=not ((left_out or beyond) and not want.buffers) or
            got.status != want.status)
    if left_out and whole_got.status == "ok":
        if bits_are_the_point:
            tally.leave_out(BITS_ARE_THE_POINT,
                            sum(int(whole_want.buffers[s].size) for s in left_out))
        else:
            against_the_truth(tally, reading, buffers, whole_want, whole_got, left_out,
                              description)
    if beyond and whole_got.status == "ok":
        within_the_propagated_bound(impl, tally, reading, buffers, whole_want, whole_got,
                                    beyond, description)
    return left_out


def within_the_propagated_bound(impl, tally, reading, buffers, want: Outcome, got: Outcome,
                                slots, description: str = "") -> None:
    """The slots `slots` (computed from the results of ops whose error the implementation
    declares in ulps, beyond_the_op) within the bound those ulps propagate
    (conformance/propagated.py): Diverged outside it. Where no bracket can be run, compared
    with the true value instead (against_the_truth)."""
    from gradient_conformance.conformance import propagated
    same = all(s in got.buffers and got.buffers[s].shape == want.buffers[s].shape and
               got.buffers[s].tobytes() == want.buffers[s].tobytes() for s in slots)
    if same:  # the spec's own bits are within the bound: no bracket to run
        tally.reach(reading, buffers)
        tally.compared(PROPAGATED, sum(int(want.buffers[s].size) for s in slots))
        return
    declared = {op: impl.ulps(op) for op in reading.features & TRANSCENDENTAL}
    runs = propagated.bracket(reading, buffers, declared)
    if runs is None or any(s not in got.buffers or np.shape(got.buffers[s]) !=
                           np.shape(want.buffers[s]) for s in slots):
        against_the_truth(tally, reading, buffers, want, got, slots, description,
                          why=BEYOND_THE_OP)
        return
    low, high = runs
    tally.reach(reading, buffers)
    tally.compared(PROPAGATED, sum(int(want.buffers[s].size) for s in slots))
    for slot in slots:
        far = propagated.outside(want.buffers[slot], low.buffers[slot], high.buffers[slot],
                                 got.buffers[slot])
        if far:
            k = far[0]
            shown = [exact.f32_to_text(int(o.buffers[slot].ravel().view(np.uint32)[k]))
                     for o in (want, low, high, got)]
            ops = ", ".join(f"{op} by {n}" for op, n in sorted(declared.items()) if n)
            raise tally.diverged(Finding(
                f"slot {slot}[{k}]: the implementation's {shown[3]} is outside what the spec "
                f"gives with the results of {ops} ulps moved down and up ({shown[1]}, "
                f"{shown[2]}; unmoved {shown[0]}): the bound its declared ulps propagate "
                f"({len(far)} elements outside it)", want, got, ProgramCase(reading, buffers),
                compare(want, got), description, comparison="bound"))


def against_the_truth(tally, reading, buffers, want: Outcome, got: Outcome, slots,
                      description: str = "", *, why: str = "") -> None:
    """The slots `slots` (made from a gradient, whose bits the implementation does not
    claim; or `why` they are not compared bit for bit) beside the true value, as the
    derivative check compares (near_the_truth):
    Diverged beyond the bound. Left out, saying why, at a point within KINK of a kink (a max
    tie, a comparison that flips, a cast at an integer: the derivative check's own cases
    keep as far), or where no truth can be had. docs/suite.md, "What a pass compared"."""
    from gradient_conformance.generators.buffers import margin
    elements = sum(int(want.buffers[s].size) for s in slots)
    missing = [s for s in slots if s not in got.buffers
               or np.shape(got.buffers[s]) != np.shape(want.buffers[s])]
    if missing:  # a slot missing, or of another shape: that is a divergence, compared so
        verdict(tally, reading, buffers, Outcome("ok", {s: want.buffers[s] for s in slots}),
                Outcome("ok", {s: got.buffers[s] for s in slots if s in got.buffers}),
                description=description)
    said = (why or UNCLAIMED).split(":")[0]
    try:
        distance = margin(reading.program(), buffers)
    except (ArithmeticError, ValueError, IRError) as problem:
        tally.leave_out(f"{said}, and no true value here ({type(problem).__name__})", elements)
        return
    if distance < KINK:
        tally.leave_out(f"{said}, and the point is within {KINK:g} of a kink (or not "
                        "computable over the reals), where no true value decides it",
                        elements)
        return
    near_the_truth(tally, reading, buffers, want, got, description, only=set(slots))


# --- values over every set of axes (test_forward.py, test_gradient_bits.py) ---------------


AXES_SHAPE = (2, 3, 1, 4)  # a middle axis of size > 1, one of size 1, and a last one


def axis_values(dtype: str, seed: int) -> np.ndarray:
    """Fixed values of AXES_SHAPE: f32 with full mantissas, so that every order of a sum
    rounds apart, with a tie, both zeros and a NaN among them; i32 small and extreme."""
    rng = np.random.default_rng(seed)
    size = math.prod(AXES_SHAPE)
    if dtype == "i32":
        values = rng.integers(-9, 10, size=size).astype(np.int32)
        values[[2, 7]] = [2**31 - 1, -2**31]
        return values.reshape(AXES_SHAPE)
    values = rng.uniform(-4, 4, size=size).astype(np.float32)
    values[1], values[5], values[6], values[size - 1] = values[0], -0.0, 0.0, np.nan
    return values.reshape(AXES_SHAPE)


def axis_sets(rank: int) -> list[tuple[int, ...]]:
    """Every set of axes of a value of `rank`, the empty one first."""
    return [tuple(k for k in range(rank) if mask >> k & 1) for mask in range(2**rank)]
