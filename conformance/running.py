"""How a check runs a case. docs/suite.md, "The conformance suite".

- `Reading`: a case's program as the reference reads it, parsed once. Its outcome under the
  spec is the expected one; under a variant of the spec (diagnosis), it is built again from
  the same parse.
- `Tally`: what one check measured while it ran: the cases per op, the forward errors, the
  figures, and the last divergence it found. Whoever runs a check gives it a new one (the
  plugin's `tally` fixture), so nothing is kept between checks.
- `Finding` and `Diverged`: a check that finds a divergence raises `Diverged`, carrying the
  finding (the case, both outcomes, their difference). Hypothesis shrinks on it as on any
  failure; whoever ran the check describes the last one (conformance/divergence.py).
- What the generated checks share: `supported`, `exclusions`, `run_both`, `verdict`,
  `check_case`.
"""

from __future__ import annotations

import functools
import math
import pathlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from hypothesis import assume

from gradient_conformance import reference
from gradient_conformance.conformance.outcome import Difference, Outcome, compare
from gradient_conformance.reference import SPEC, Semantics, cases, conditions, exact
from gradient_conformance.reference.builder import build_program
from gradient_conformance.reference.cases import output_only_slots, poisoned
from gradient_conformance.reference.errors import IndexOutOfRange, IRError
from gradient_conformance.reference.interp import Interpreter, from_numpy
from gradient_conformance.reference.ops import (
    FEATURES,
    TRANSCENDENTAL,
    TRAPS,
    features_of_statements,
    typed_features,
)
from gradient_conformance.reference.program import (
    Define,
    Program,
    Store,
    cone,
    made_by_gradient,
)
from gradient_conformance.reference.realvalued import Real
from gradient_conformance.reference.syntax import parse


class Reading:
    """A program as the reference reads it: parsed once (`statements`, or the `error` of a
    source that does not parse), built under the spec once and kept, and under any other
    semantics on demand. The oracle is trusted and called directly: only its IRErrors are
    answers; anything else it raises is a bug of the suite's, and ends the check as an
    error rather than be blamed on the implementation. `measure`: whether its run under the
    spec also measures the conditions it took; not for a re-run of a case already counted
    (Hypothesis's shrink, the reducer), whose conditions nobody reads."""

    def __init__(self, source: str, statements=(), *, measure: bool = True,
                 built: Program | None = None):
        self.source, self.measure = source, measure
        self.statements: list | None = list(statements) or None  # parsed already, if given
        self.error: IRError | None = None
        if self.statements is None:
            try:
                self.statements = parse(source)
            except IRError as problem:
                self.error = problem
        # The spec's build, kept; given by a strategy that built it from these statements.
        self._spec: Program | IRError | None = built if self.statements else None
        self.reached: frozenset[str] | None = None  # the conditions of its last run

    def conditions(self, buffers=None) -> frozenset[str]:
        """The spec's conditions this case took (reference/conditions.py): those of its run
        under the spec, or, for a program that was only built or is rejected, of its build."""
        if self.reached is not None:
            return self.reached
        try:
            program, problem = self.program(), None
        except IRError as rejected:
            program, problem = None, rejected
        self.reached = frozenset(conditions.measure(
            self.source, self.statements or [], buffers, program=program,
            problem=problem).names)
        return self.reached

    @functools.cached_property
    def slots(self) -> dict[int, tuple[str, tuple[int, ...]]]:
        """slot -> (dtype, shape), as the program declares them."""
        return cases.slots_of(self.statements or [])

    @functools.cached_property
    def features(self) -> frozenset[str]:
        return features_of_statements(self.statements or [])

    @functools.cached_property
    def built_nodes(self) -> tuple | None:
        """Every node of its build under the spec, its calls' bodies' too (None when it does
        not build)."""
        try:
            program = self.program()
        except IRError:
            return None
        graphs = [program.graph, *(i.graph for i in program.calls.values())]
        return tuple(n for g in graphs for n in g.nodes)

    @functools.cached_property
    def reaches(self) -> frozenset[str]:
        """Its features and the op of every node of its build, those its gradients build
        included (a rule's expansion holds ops the text need not write: log2's share has a
        recip, whose rule its second derivative takes): what a variant of an op's arithmetic
        or rule can change (variants.applies)."""
        nodes = self.built_nodes
        return self.features if nodes is None else \
            self.features | frozenset(n.op for n in nodes)

    @functools.cached_property
    def uses(self) -> frozenset[str]:
        """Its features and, when it builds, its ops by dtype (`and:bool`): what it needs of
        an implementation (CAPABILITIES["unsupported"])."""
        nodes = self.built_nodes
        return self.features if nodes is None else self.features | typed_features(nodes)

    def program(self, semantics: Semantics = SPEC) -> Program:
        """The built program, or the IRError that rejects it."""
        if self.error is not None:
            raise self.error
        assert self.statements is not None  # parsed: else self.error says why not
        if semantics is not SPEC:
            if semantics.reads is not SPEC.reads:  # a variant that reads the text otherwise
                read = semantics.reads(self.source)
                if read != self.source:  # else it reads what the spec reads: no parse
                    return build_program(parse(read), semantics)
            return build_program(self.statements, semantics)
        if self._spec is None:
            try:
                self._spec = build_program(self.statements, SPEC)
            except IRError as problem:
                self._spec = problem
        if isinstance(self._spec, IRError):
            raise self._spec
        return self._spec

    def outcome(self, buffers, semantics: Semantics = SPEC, *,
                build_only: bool = False) -> Outcome:
        """The reference's outcome on `buffers` (under `semantics`; only built, when
        `build_only`)."""
        try:
            program = self.program(semantics)
        except IRError as problem:  # reason "limit": the reference's own, not the course's
            return Outcome("rejected", message=str(problem), reason="limit" * problem.limit)
        if build_only:
            return Outcome("ok")
        # Under the spec, the run also measures the conditions the case took.
        reached = None
        if semantics is SPEC and self.measure:
            reached = conditions.Reached()
            reached.text(self.source, self.statements or [])
            reached.program(program)
        observe = reached.observe if reached is not None else None
        try:
            final = reference.Runner(program, observe=observe)(
                {s: a.copy() for s, a in buffers.items()})
        except IndexOutOfRange as problem:
            if reached is not None:
                reached.rejected(problem)
                self.reached = frozenset(reached.names)
            return Outcome("run-error", message=str(problem), index=True)
        if reached is not None:
            self.reached = frozenset(reached.names)
        return Outcome("ok", buffers=final)


def expected(source: str, buffers, semantics: Semantics = SPEC, *,
             build_only: bool = False) -> Outcome:
    """The reference's outcome for a program read once and used once."""
    return Reading(source).outcome(buffers, semantics, build_only=build_only)


@dataclass(frozen=True)
class ProgramCase:
    """A program as the check read it, and the buffers it gave both sides."""

    reading: Reading
    buffers: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.reading.source

    @property
    def size(self) -> int:
        return len(self.reading.statements or [])

    def shown(self) -> str:
        return f"--- program ---\n{self.reading.source}"


@dataclass(frozen=True)
class TapeCase:
    """A tape as the check gave it to backprop() (whatever it holds: an invalid tape is a
    case too)."""

    tape: object

    @property
    def text(self) -> str:
        return ""  # a tape has no program text: its record shows the entries

    @property
    def size(self) -> int:
        return len(self.tape) if isinstance(self.tape, list) else 1

    def shown(self) -> str:
        return f"tape: {self.tape!r}"


class Case(Protocol):
    """What every case gives the failure stage (conformance/failure.py): its program's text
    (empty for a tape), its size in statements or entries, and how a failure shows it. Each
    stage that treats programs and tapes differently (describe, reduce, explain, known)
    tells the two kinds of `CaseKind` apart once, by isinstance of TapeCase."""

    @property
    def text(self) -> str: ...

    @property
    def size(self) -> int: ...

    def shown(self) -> str: ...


CaseKind = ProgramCase | TapeCase


@dataclass
class Finding:
    """A divergence as a check found it: what to say (`summary`), both outcomes, the case
    (a program and its buffers, or a tape) and the outcomes' difference. `rule`: the
    rejection rule a missed rejection broke. `ulps`: what the check allowed each f32
    element, which whatever explains the finding must allow too, and no more."""

    summary: str
    want: Outcome
    got: Outcome
    case: CaseKind
    difference: Difference | None = None
    description: str = ""
    rule: str | None = None
    ulps: int = 0
    # How the check compared: "outcomes" (compare, within `ulps`, of what the implementation
    # claims), which the reducer can repeat; "truth" (near_the_truth), which it does not.
    comparison: str = "outcomes"


class Diverged(AssertionError):
    """A check's failure, carrying its finding. An AssertionError, so that pytest and
    Hypothesis treat it as any failed assertion (and shrink on it)."""

    def __init__(self, finding: Finding):
        self.finding = finding
        super().__init__("\n".join(filter(None, [finding.summary, finding.description,
                                                 finding.case.shown()])))


def merge_figures(a: dict, b: dict) -> dict:
    """Two checks' figures as one: the larger of each max_ value, the bound_ values as they
    are (a constant of the check), the sum of the others."""
    out = dict(a)
    for key, value in b.items():
        if key not in out or key.startswith("bound_"):
            out[key] = value
        elif key.startswith("max_"):
            out[key] = max(out[key], value)
        else:
            out[key] += value
    return out


RARE = "rarely taken conditions"  # the label of a guided case's score (Tally.reach)

# How a check compared what it compared (docs/suite.md, "What a pass compared"): the ledger's
# keys, in the order the summary says them.
BITS = "bit for bit"
ULPS = "within the declared ulps"
TRUTH = "against the true derivative"
STATUS = "statuses"  # a rejection, an acceptance or a run-time error, by kind
LINES = "line numbers in messages"  # a text error's line, as ir.md asks of every message
HOW = (BITS, ULPS, TRUTH, STATUS, LINES)
# What an `#: error-mentions` line says beyond a line number: the reference's own words.
WORDING = ("the wording an `#: error-mentions` line asks beyond its line number: the "
           "reference's own, not asked of an implementation (ir.md asks for the line and a "
           "message a person can act on)")
UNCHECKED = "messages: not compared (CAPABILITIES['messages'] is False)"


class NothingCompared(Exception):
    """A check that ran to its end without comparing one output or status: a failure of the
    suite's own, never a pass (docs/suite.md, "What a pass compared")."""


class Tally:
    """What one check measured while it ran. `generated`: whether Hypothesis drives the check;
    `guided`: whether its cases steer Hypothesis towards conditions it has rarely taken
    (`reach`)."""

    def __init__(self, *, generated: bool = False, guided: bool = False):
        self.generated, self.guided = generated, guided
        self._scored = -1  # the case last looked at by `reach`, and what it took
        self._seen: set[str] = set()
        self.cases = 0
        self.reruns = 0  # cases run while Hypothesis shrank a divergence: not counted
        self.ops: Counter[str] = Counter()  # op -> cases of this check that used it
        self.conditions: Counter[str] = Counter()  # condition -> cases that took it
        self.ulps: dict[str, dict] = {}  # op -> the forward error figures of the ulp chart
        self.figures: dict[str, dict] = {}  # name -> figures to merge across checks
        self.last: Finding | None = None  # the last divergence raised
        self.findings = 0  # divergences raised (the first, and those of further looks)
        # What was compared (HOW -> outputs) and what was left out (why -> outputs).
        self.ledger: Counter[str] = Counter()
        self.left_out: Counter[str] = Counter()
        # A second look (plugin.py): the subjects of the divergences found already, passed
        # over; how a finding's subject is read; and the other divergences found.
        self.known: set = set()
        self.subject: Callable[[Finding], object] = lambda finding: None
        self.more: list[Finding] = []
        # Known divergences (conformance/known.py): what tells the entry that names a
        # finding, given by the plugin; the entries found, passed over as the second look's.
        self.expected: Callable[[Finding], str | None] | None = None
        self.matched: set[str] = set()
        # The first finding each known entry matched: a variant entry is confirmed on it once
        # per run (failure.FailureStage.sort_known).
        self.matched_findings: dict[str, Finding] = {}
        # The implementation's health in this check (transports/loading.py, Guarded).
        self.restarts_before = 0  # its restarts when the check began
        self.abandon = ""  # why the check stops calling it, once it must
        self.timed_out = False  # whether it timed out in this check

    def case(self, features) -> None:
        """A case ran; it used `features` (the IR's own only: an error case's unknown op is
        none). Once the check has found a divergence, Hypothesis only shrinks it: those
        re-runs are counted apart, so that the figures count distinct cases."""
        if self.last is not None:
            self.reruns += 1
            return
        self.cases += 1
        self.ops.update(set(features) & FEATURES)

    @property
    def measuring(self) -> bool:
        """Whether a case counts now: not once the check has found its divergence, when
        Hypothesis only shrinks it."""
        return self.last is None

    def reach(self, reading: Reading, buffers=None) -> None:
        """A case took these conditions (reference/conditions.py): each counted once a case
        (`case` begins one), and not while Hypothesis shrinks. Guided, the case is scored by
        how rarely this check took its conditions before, sum(1 / (1 + times taken)), and
        Hypothesis is told the score (`target`): its targeting phase mutates the cases of
        the highest scores, and with a database keeps them for later runs, so a long run
        goes after the conditions it rarely meets instead of redrawing the common ones
        (docs/generators.md, "Conditions")."""
        if self.last is not None:
            return
        fresh = set(reading.conditions(buffers))
        if self._scored != self.cases:  # the case's first look
            self._scored, self._seen = self.cases, set()
            if self.guided and self.generated:
                from hypothesis import target
                target(sum(1.0 / (1 + self.conditions[n]) for n in fresh), label=RARE)
        fresh -= self._seen
        self._seen |= fresh
        self.conditions.update(fresh)

    def compared(self, how: str, outputs: int) -> None:
        """`outputs` outputs (elements, derivatives, or one status) compared `how` (HOW);
        not counted while Hypothesis shrinks (see `case`)."""
        assert how in HOW, how
        if self.last is None:
            self.ledger[how] += outputs

    def leave_out(self, why: str, outputs: int) -> None:
        """`outputs` outputs not compared, for the reason `why` (said on the pass)."""
        if self.last is None:
            self.left_out[why] += outputs

    def measure(self, name: str, **values) -> None:
        """Add to the figures `name` (not while shrinking: see `case`)."""
        if self.last is None or name not in self.figures:
            self.figures[name] = merge_figures(self.figures.get(name, {}), values)

    def diverged(self, finding: Finding) -> Diverged:
        """The failure to raise for `finding`, kept as the last one: a check that ends
        otherwise (the implementation hung while it shrank) still has it described. On a
        second look, a finding of a subject already found is passed over instead, and so is
        one a known entry names, so that the search goes on past it."""
        entry = self.expected(finding) if self.expected is not None else None
        if entry is not None:
            self.matched.add(entry)
            self.matched_findings.setdefault(entry, finding)
        if entry is not None or (self.known and self.subject(finding) in self.known):
            from hypothesis import reject
            reject()
        self.last = finding
        self.findings += 1
        return Diverged(finding)

    def record(self) -> dict:
        """What it measured, as a check's record carries it (JSON)."""
        figures = {name: {**values, "reruns": self.reruns, "diverged": self.findings}
                   for name, values in self.figures.items()}
        return {"cases": self.cases, "reruns": self.reruns, "generated": self.generated,
                "ops": dict(self.ops),
                "conditions": dict(self.conditions), "ulps": self.ulps, "figures": figures,
                "compared": dict(self.ledger), "left_out": dict(self.left_out),
                **({"known": sorted(self.matched)} if self.matched else {})}


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


def made_by_gradients(reading: Reading) -> set[int]:
    """The slots whose final values depend on a gradient statement (a gradient's value, or
    anything computed from one), in a program the spec builds: what an implementation that
    does not claim bit-exact gradients need not give bit for bit."""
    program = reading.program()
    made = {s.node for s in program.statements if getattr(s, "expansion", None) is not None}
    return {slot for slot in program.buffers if cone(program, slot)[0] & made}


def hash_consed_gradients(program: Program) -> list[Define]:
    """The gradient statements taken against a node that, by hash consing, an earlier
    gradient's expansion built (SPEC.md, "Hash consing"): which node their x is follows
    from that gradient's rule forms, so their value is no calculus for an implementation
    whose forms differ."""
    return [s for s in program.statements if isinstance(s, Define) and s.expansion is not None
            and made_by_gradient(program, s.expansion.x) is not None]


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
        raise tally.diverged(Finding(f"{context}{difference}", want, got,
                                     ProgramCase(reading, buffers), difference, description,
                                     ulps=ulps))


def count_compared(tally: Tally, want: Outcome, ulps: int = 0) -> None:
    """`want`'s outputs on the ledger: its elements (bit for bit, or within `ulps`), or its
    status where it expects no values."""
    elements = sum(int(np.asarray(a).size) for a in want.buffers.values()) \
        if want.status == "ok" else 0
    if elements:
        tally.compared(ULPS if ulps else BITS, elements)
    else:
        tally.compared(STATUS, 1)


def require_compared(tally: Tally) -> None:
    """Raise NothingCompared for a check that ended without comparing anything."""
    if not tally.ledger and tally.last is None:
        left = "; ".join(f"{n} outputs left out: {why}" for why, n in tally.left_out.items())
        raise NothingCompared("nothing was compared: the check ran to its end without "
                              "comparing one output or status of the implementation's"
                              + (f" ({left})" if left else ""))


def check_case(impl, tally: Tally, case, *, ulps: int = 0) -> None:
    """A generated case on both; Diverged if they differ (in what the implementation
    claims: `claimed`)."""
    reading, want, got = run_both(impl, case.source, case.buffers, case.parsed,
                                   built=case.built, tally=tally)
    whole = want
    want, got, left_out = claimed(impl, reading, want, got)
    if left_out:
        tally.leave_out(UNCLAIMED, sum(int(whole.buffers[s].size) for s in left_out))
    verdict(tally, reading, case.buffers, want, got, ulps=ulps, description=case.description)


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
    difference = compare(claimed_want, claimed_got, ulps=ulps)
    if difference is not None and difference.differing:
        combinations = case.combinations_of(difference.differing)
        tries = [combinations[:1]] if len(case.rows) > 1 else []  # else it is the whole
        if 1 < len(combinations) < len(case.rows):
            tries.append(combinations)
        for kept in tries:
            narrowed = case.narrowed(kept)
            small = narrowed.buffers
            n_reading, n_want, n_got = run_both(impl, narrowed.source, small, tally=tally)
            n_want_claimed, n_got_claimed, _ = claimed(impl, n_reading, n_want, n_got)
            if compare(n_want_claimed, n_got_claimed, ulps=ulps) is not None:
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


# The bound against the true derivative (test_derivative.py says why): K times the
# reference's own f32 error at the point, plus C ulps of the true value; the truth from
# DIGITS-digit finite differences with a relative step of STEP.
K, C = 4, 4
DIGITS, STEP = 50, 1e-20


def ulp(value: float) -> float:
    """The f32 ulp at `value` (the smallest subnormal at 0 and beyond the finite)."""
    if value == 0 or not math.isfinite(value):
        return 2.0**-149
    return float(np.spacing(np.float32(abs(value)))) or 2.0**-149


def check_case_file(impl, tally, path, description: str) -> None:
    """One case file through the implementation: its expected rejection (by kind only), its
    run-time error (an index out of range), or its outputs (bit for bit, or within the
    declared ulps where exp2, log2 or sin is used; the slots made from a gradient against
    the true derivative where the implementation claims no bit-exact gradients, unless the
    file's point is their bits, as `replay` compares: compare_claims). A file with
    nothing left to compare is skipped, saying why. The case-file checks' own
    (checks/test_cases.py, test_semantics.py), here so that a test can run it beside
    `replay`: docs/suite.md, "What a pass compared"."""
    case = cases.load_case(path)
    reading = Reading(case.source)
    features = reading.features  # none for a file that does not parse: an error case
    if why := unsupported_by(impl, reading):
        _skip(why)
    tally.case(features)
    if case.error is not None:
        if why := beyond_limits(reading.outcome({}, build_only=True)):
            _skip(why)
        want, got = Outcome("rejected", message=case.error), impl.build_only(case.source)
        tally.reach(reading)
        tally.compared(STATUS, 1)
        difference = compare(want, got)
        if difference is not None:
            raise tally.diverged(Finding(
                f"expected a rejection ({case.error}): {difference}", want, got,
                ProgramCase(reading), difference, description, rule=case.error))
        check_mentions(impl, tally, case, reading, got, description)
        return
    buffers = case_file_buffers(case, reading.slots)
    if why := trapped_by(impl, reading, buffers) or \
            beyond_limits(reading.outcome(buffers, build_only=True)):
        _skip(why)
    got = impl.run_case(case.source, buffers, reading.slots)
    ulps = max((impl.ulps(op) for op in features & TRANSCENDENTAL), default=0)
    left_out = compare_claims(impl, tally, reading, buffers, reading.outcome(buffers), got,
                              ulps=ulps, description=description,
                              bits_are_the_point=bits_are_the_point(path))
    # Nothing of what the file names as its outputs compared (as `replay`, which compares
    # those alone, says NOT COMPARED): the other slots it compared are its inputs.
    listed = set(case.outputs) | set(case.near)
    if not tally.ledger or (listed and listed <= set(left_out) and TRUTH not in tally.ledger):
        _skip("nothing the file names as its outputs is left to compare: "
              + "; ".join(tally.left_out))


def check_mentions(impl, tally, case, reading, got: Outcome, description: str) -> None:
    """A rejection's message beside the file's `#: error-mentions` lines (docs/suite.md,
    "What a pass compared"): a mention that gives a line ("line 5 ...") asks the message for
    that line's number, as ir.md asks of every error in the text; the rest of its words are
    the reference's, left out, saying so. Not at all where CAPABILITIES["messages"] is
    False."""
    if not case.mentions:
        return
    if not impl.capabilities.get("messages", True):
        tally.leave_out(UNCHECKED, len(case.mentions))
        return
    for mention in case.mentions:
        line = re.match(r"line (\d+)\b", mention)
        if line is None:
            tally.leave_out(WORDING, 1)
            continue
        tally.compared(LINES, 1)
        if not re.search(rf"(?<!\d){line.group(1)}(?!\d)", got.message):
            said = (f"the rejection's message does not give the line, {line.group(1)} (the "
                    f"file says it mentions {mention!r}): {got.message!r}")
            raise tally.diverged(Finding(
                said, Outcome("rejected", message=mention), got, ProgramCase(reading),
                Difference(said, "message"), description, rule=case.error))
        if mention.strip() != line.group(0):
            tally.leave_out(WORDING, 1)


def case_file_buffers(case, slots) -> dict:
    """A case file's initial contents: its `#: in` lines, zeros for the other slots it
    loads, and POISON for a slot it only stores into (reference/ops.py says why)."""
    buffers = cases.initial_buffers(case, slots)
    stored_only = output_only_slots(case.source) - set(case.inputs)
    return {slot: poisoned(slots[slot]) if slot in stored_only else array
            for slot, array in buffers.items()}


def single_op_source(op: str, count: int) -> str:
    """`op` over `count` f32 values of slot 0, stored back: how one op is measured alone."""
    return (f"%a = buffer slot=0 dtype=f32 shape=[{count}]\n%x = load %a\n%y = {op} %x\n"
            "store %a %y\n")


# --- the truth (test_derivative.py) ---------------------------------------------------------


def truths(program: Program, buffers) -> tuple[dict[int, list], set[int]]:
    """Every f32 slot's true final value, and which slots came from finite differences."""
    domain = Real(DIGITS)

    def run(arrays, pinned=None):
        memory = {slot: from_numpy(array, program.buffers[slot].dtype, domain)
                  for slot, array in arrays.items()}
        return Interpreter(program, domain).evaluate(memory, pinned)

    final, env = run(buffers)
    values = {slot: list(final[slot].flat) for slot, node in program.buffers.items()
              if node.dtype == "f32"}
    pinned = {node: value for node, value in env.items() if node.op == "detach"}
    differenced = set()
    for slot, y, x in _gradients_of_inputs(program):
        column = []
        for i, xi in enumerate(buffers[x].ravel().astype(np.float64)):
            h = domain.mp.mpf(STEP) * max(abs(domain.mp.mpf(float(xi))), 1e-3)
            sides = []
            for sign in (1, -1):
                moved = {k: from_numpy(v, program.buffers[k].dtype, domain)
                         for k, v in buffers.items()}
                moved[x].flat[i] = moved[x].flat[i] + sign * h
                _, moved_env = Interpreter(program, domain).evaluate(moved, pinned)
                sides.append(moved_env[y].item())
            column.append((sides[0] - sides[1]) / (2 * h))
        values[slot] = column
        differenced.add(slot)
    return values, differenced


def _gradients_of_inputs(program):
    """(slot the gradient is stored in, loss node, input slot) for each top-level gradient
    whose x is a load of a whole input buffer, before any store to it."""
    found: list[tuple] = []
    stored: dict = {}
    for s in program.statements:
        if isinstance(s, Store) and s.index is None:
            stored.setdefault(s.value, s.buffer.attr("slot"))
    for s in program.statements:
        if isinstance(s, Define) and s.expansion is not None:
            x = s.expansion.x
            if x.op == "load" and len(x.operands) == 1 and x.tag == 0 and s.node in stored:
                found.append((stored[s.node], s.expansion.y, x.operands[0].attr("slot")))
    return found


def near_the_truth(tally, reading, buffers, want, got, description: str = "", *,
                   only=None) -> None:
    """Raise Diverged unless every f32 output the implementation gave (`got`) is within the
    bound of the truth, at this point; slots made from a gradient taken against a node
    hash consing made another gradient's are left out (checks/test_derivative.py says
    why). `only`: the slots to compare (all, by default). Each output compared goes on the
    ledger (TRUTH); one whose truth is not finite (an overflow, a pole) is left out."""
    program = reading.program()
    values, differenced = truths(program, buffers)
    structural = {d.node for d in hash_consed_gradients(program)}
    left_out = {slot for slot in values if cone(program, slot)[0] & structural}
    tally.measure("derivative", cases=1, differenced=len(differenced), bound_K=K, bound_C=C,
                  left_out_hash_consed=len(left_out))
    for slot, reals in values.items():
        if only is not None and slot not in only:
            continue
        if slot in left_out:
            tally.leave_out("made from a gradient whose x hash consing made another "
                            "gradient's node: no true derivative of the text's own",
                            len(reals))
            continue
        ref = want.buffers[slot].ravel().astype(np.float64)
        mine = got.buffers[slot].ravel().astype(np.float64)
        for k, real in enumerate(reals):
            truth = float(real)
            if not math.isfinite(truth) or not math.isfinite(ref[k]):
                # overflow or a pole: nothing to measure against
                tally.leave_out("no finite true value (an overflow or a pole)", 1)
                continue
            tally.compared(TRUTH, 1)
            allowed = K * abs(ref[k] - truth) + C * ulp(truth)
            # A NaN or an infinity where the truth is finite is as far off as can be.
            error = abs(mine[k] - truth) if math.isfinite(mine[k]) else math.inf
            tally.measure("derivative", outputs=1, over=int(error > allowed),
                          max_used=min(error / allowed, 1e9))
            if error > allowed:
                ulps = exact.ulp_distance(exact.encode(float(np.float32(truth))),
                                          exact.encode(float(np.float32(mine[k])))) \
                    if math.isfinite(mine[k]) else "inf"
                raise tally.diverged(Finding(
                    f"slot {slot}[{k}]: the true value is {truth!r}, the reference gives "
                    f"{float(ref[k])!r}; the implementation's {float(mine[k])!r} is off by "
                    f"{error:.3g} ({ulps} ulps), allowed {allowed:.3g} (K = {K}, C = {C})",
                    want, got, ProgramCase(reading, buffers), compare(want, got), description,
                    comparison="truth"))


KINK = 1e-3  # how far from every kink a point must be for its truth to be compared


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
    # Every slot left out: the status alone is not what a program with outputs is about,
    # unless it differs.
    verdict(tally, reading, buffers, want, got, ulps=ulps, description=description,
            counted=not (left_out and not want.buffers) or got.status != want.status)
    if left_out and whole_got.status == "ok":
        if bits_are_the_point:
            tally.leave_out(BITS_ARE_THE_POINT,
                            sum(int(whole_want.buffers[s].size) for s in left_out))
        else:
            against_the_truth(tally, reading, buffers, whole_want, whole_got, left_out,
                              description)
    return left_out


def against_the_truth(tally, reading, buffers, want: Outcome, got: Outcome, slots,
                      description: str = "") -> None:
    """The slots `slots` (made from a gradient, whose bits the implementation does not
    claim) beside the true derivative, as the derivative check compares (near_the_truth):
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
    try:
        distance = margin(reading.program(), buffers)
    except (ArithmeticError, ValueError, IRError) as problem:
        tally.leave_out(f"{UNCLAIMED.split(':')[0]}, and no true derivative here "
                        f"({type(problem).__name__})", elements)
        return
    if distance < KINK:
        tally.leave_out(f"{UNCLAIMED.split(':')[0]}, and the point is within {KINK:g} of a "
                        "kink (or not computable over the reals), where no true derivative "
                        "decides it", elements)
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
