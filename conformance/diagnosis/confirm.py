"""Hypotheses tested: a variant is named only when other programs confirm it. docs/diagnosis.md,
"Confirmation".

A variant (or a pair) that reproduces the program a check found is a hypothesis about the
implementation, not yet an explanation: two behaviours may agree on one program and on no
other (a `where` rule that sends -0.0 to the unselected side agrees with one that sends g
there only where g is -0.0). So the experiment: programs on which the hypothesis and the
spec give different results (*separating* programs) are run on the implementation as the
check ran the found one (the same comparison, the same ulps), and a hypothesis is

- **confirmed** when the implementation bore it out on every separating program run, at
  least one: the hypothesis's status, and its value at every element where it departs from
  the spec (`bears_out`; an element where only the implementation departs, and a crash or
  a rejection where the hypothesis keeps the spec's status, are another cause's, so a
  second fault does not refute a right hypothesis), compared as the check compared (its
  ulps; no sign of a zero where it compared with the true derivative);
- **refuted** when the implementation did otherwise on one (where two hypotheses differ
  from each other, a program separating either tells them apart the same way);
- **unconfirmed** when no separating program was found within the search.

A confirmed hypothesis that keeps the spec's values on a program where another confirmed
hypothesis is borne out (its `silent` programs) explains less than that one, and is not
named beside it (explain.tested).

Only a confirmed hypothesis is named as an explanation. The programs come from three
sources, nearest first: the found program with other inputs (drawn as the generators draw
inputs), the case files the package ships, and programs drawn from the generators (a tape's:
the tape case files and drawn tapes). Each source gives a hypothesis PER_SOURCE separating
programs at most, so that no one source confirms it alone when another can refute it.
Drawing is derandomized, so a run repeats its experiments. The search ends when the sources
do (DRAWS each), or at SECONDS, or when the run's budget for explaining runs out, and says
which ended it.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from gradient_conformance import resource
from gradient_conformance.conformance.diagnosis.diagnose import same_line
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE, applies
from gradient_conformance.conformance.findings import Finding, TapeCase
from gradient_conformance.conformance.outcome import Difference, Outcome, compare
from gradient_conformance.conformance.readings import (
    Reading,
    gradients_shown,
    rejection,
    stores_a_gradient,
)
from gradient_conformance.conformance.running import trapped_by, unsupported_by
from gradient_conformance.reference import cases
from gradient_conformance.reference.errors import RULES, GradientError
from gradient_conformance.reference.semantics import Semantics
from gradient_conformance.reference.tape import backprop_bits, load_tape_case

REFILL_ELEMENTS = 256  # input elements of a found program past which none are refilled
PER_SOURCE = 2  # separating programs a hypothesis is run on from each source, at most
DRAWS = 120  # programs (or inputs) drawn, and programs looked at, from each source, at most
SECONDS = 8.0  # the experiment on one divergence, at most
# A trial's detail where the hypothesis keeps the spec's values and the implementation does not.
SILENT = "silent"


@dataclass
class Evidence:
    """What the experiment found for one hypothesis: the separating programs on which the
    implementation gave its results (`support`, each named by where it came from), and the
    first program on which the implementation did otherwise (`against`: where it came from
    and how the results differed), if any."""

    name: str
    support: list[str] = field(default_factory=list)
    against: str = ""
    # The programs on which the hypothesis keeps the spec's values and the implementation
    # departs from them (departs_alone): a hypothesis confirmed on one of them explains more.
    silent: list[str] = field(default_factory=list)
    subsumed: str = ""  # the confirmed hypothesis that explains more, and on which program

    @property
    def confirmed(self) -> bool:
        return bool(self.support) and not self.against

    @property
    def refuted(self) -> bool:
        return bool(self.against)

    def to_dict(self) -> dict:
        return {"name": self.name, "support": list(self.support), "against": self.against,
                "silent": list(self.silent), "subsumed": self.subsumed}


@dataclass(frozen=True)
class Hypothesis:
    """The implementation is the spec under `semantics`; `relevant(features)` says whether
    a program with those features can tell it from the spec (variants.applies)."""

    semantics: Semantics
    relevant: Callable[[frozenset[str]], bool]


def hypothesis_of(*names: str) -> Hypothesis:
    """The hypothesis that the implementation is the spec under the catalogue's variants
    `names`, applied in that order (one, or a pair in an order in which both are in effect);
    a program can tell it from the spec where one of them applies."""
    semantics = CATALOGUE[names[0]].semantics()
    for name in names[1:]:
        semantics = CATALOGUE[name].change(semantics)
    return Hypothesis(semantics,
                      lambda features: any(applies(CATALOGUE[n], features) for n in names))


@dataclass
class Experiment:
    """The experiment on one divergence's hypotheses: each one's evidence, how many programs
    were looked at and run on the implementation, and what ended the search early, if
    anything did."""

    evidence: dict[str, Evidence]
    looked: int = 0
    ran: int = 0
    seconds: float = 0.0
    stopped: str = ""

    def confirmed(self) -> list[str]:
        return [n for n, e in self.evidence.items() if e.confirmed]


@dataclass
class Trial:
    """A program of the experiment: what names it among the run's shared programs (None: a
    divergence's own), where it came from, its features (None for a tape), its outcome
    under a semantics (None: the spec's; None back: the semantics cannot express it), and
    its outcome on the implementation; and whether the spec rejects a gradient of it by a
    rule while its run shows no value computed from that gradient (nothing stored from it,
    or only built), so that accepting it says nothing of what a variant computes."""

    key: object
    label: str
    features: frozenset[str] | None
    outcome: Callable[[Semantics | None], Outcome | None]
    implementation: Callable[[], Outcome]
    gradient_unseen: bool = False


def bears_out(spec: Outcome, theirs: Outcome, got: Outcome, ulps: int, *,
              zero_signs: bool = True) -> bool | None:
    """Whether the implementation's outcome `got` bears out the hypothesis, whose outcome is
    `theirs`, where it departs from the spec's (`spec`): None where it does not depart (the
    program says nothing of it); else True when the implementation gives the hypothesis's
    status and, at every element where the hypothesis departs from the spec, its value,
    compared as the check compares (`ulps`; `zero_signs` False: a check against the true
    derivative, which no sign of a zero decides). What only the implementation departs in
    is another cause's (a second fault), not evidence against this one: an element where
    the hypothesis keeps the spec's value, and a crash or a rejection where the hypothesis
    keeps the spec's status (docs/diagnosis.md, "Confirmation")."""
    departs = compared(spec, theirs, ulps, zero_signs)
    if departs is None:
        return None
    if got.status == "failure" or (theirs.status == spec.status != got.status):
        return None  # the implementation's own crash or rejection, which no variant explains
    mismatch = compared(theirs, got, ulps, zero_signs)
    if mismatch is None:
        return same_line(theirs, got)  # a rejection for the same reason, as far as shown
    if spec.status != "ok" or theirs.status != "ok" or got.status != "ok" or \
            mismatch.kind == "missing" or not departs.differing:
        return False  # a status, or a shape: the whole outcome is the hypothesis's claim
    return not mismatch.differing & departs.differing


def departs_alone(spec: Outcome, got: Outcome, ulps: int, zero_signs: bool = True) -> bool:
    """Whether the implementation's outcome departs from the spec's in values, as the check
    compares them: on a program where a hypothesis keeps the spec's values, what another
    hypothesis that departs as the implementation does explains, and this one does not."""
    return spec.status == got.status == "ok" and \
        compared(spec, got, ulps, zero_signs) is not None


def compared(want: Outcome, got: Outcome, ulps: int, zero_signs: bool) -> Difference | None:
    """compare, but where `zero_signs` is False, an element that differs only in the sign of
    a zero is no difference (a check against the true derivative compares none)."""
    difference = compare(want, got, ulps=ulps)
    if zero_signs or difference is None or difference.kind == "missing" or \
            want.status != "ok" or got.status != "ok" or want.derivatives:
        return difference
    signs = {(slot, int(k)) for slot, w in want.buffers.items() if w.dtype == np.float32
             for k in np.flatnonzero((w.ravel() == 0) & (got.buffers[slot].ravel() == 0))}
    kept = difference.differing - signs
    if not kept:
        return None
    if kept == difference.differing:
        return difference
    elements = [e for e in difference.elements if (e.slot, e.index) in kept]
    first = elements[0] if elements else None
    summary = (f"slot {first.slot}[{first.index}]: expected {first.expected}, got "
               f"{first.actual}" if first else f"{len(kept)} elements differ")
    return Difference(summary, "bits", elements, frozenset(kept))


def _detail(theirs: Outcome, got: Outcome, ulps: int, zero_signs: bool = True) -> str:
    """How the implementation's outcome differs from the hypothesis's, in compare's words
    with its two sides named: only compare's own "expected" and "got" (the first of each, as
    whole words) are renamed, never the words of a message it quotes after them."""
    difference = compared(theirs, got, ulps, zero_signs)
    if difference is None:
        return ""
    said = re.sub(r"\bexpected\b", "hypothesis", str(difference), count=1)
    return re.sub(r"\bgot\b", "implementation", said, count=1)


def experiment(hypotheses: dict[str, Hypothesis], finding: Finding, impl, *,
               deadline: float, library: CaseFiles | None = None) -> Experiment:
    """Run the experiment (this module's docstring) on `hypotheses` for the divergence
    `finding`, by `deadline` (a time.monotonic()) at the latest. `library`: the run's case
    files, and what the implementation did on them and on the drawn programs (`memo`)."""
    started = time.monotonic()
    search = _Search(Experiment({name: Evidence(name) for name in hypotheses}), hypotheses,
                     finding.ulps, min(deadline, started + SECONDS), started,
                     zero_signs=finding.comparison != "truth")
    library = library if library is not None else CaseFiles()
    for source in _sources(finding, impl, library, search.deadline):
        search.start(library.memo if source.shared else None)
        source.feed(search.visit)
        result = search.result
        if result.stopped or all(e.refuted for e in result.evidence.values()):
            break
    search.result.seconds = time.monotonic() - started
    return search.result


class _Search:
    """The experiment's state while it goes through its sources: each program a source
    gives is `visit`ed, and says whether the source should go on."""

    def __init__(self, result: Experiment, hypotheses: dict[str, Hypothesis], ulps: int,
                 deadline: float, started: float, *, zero_signs: bool = True):
        self.result, self.hypotheses, self.ulps = result, hypotheses, ulps
        self.zero_signs = zero_signs
        self.deadline, self.started = deadline, started
        self.taken: dict[str, int] = {}
        self.looked = 0
        self.memo: dict | None = None

    def start(self, memo: dict | None) -> None:
        """A new source: each hypothesis may take PER_SOURCE separating programs from it;
        `memo`: the run's record of what programs of a shared source gave (None: its
        programs are this divergence's own)."""
        self.taken, self.looked, self.memo = dict.fromkeys(self.hypotheses, 0), 0, memo

    def visit(self, trial: Trial) -> bool:
        result = self.result
        if time.monotonic() >= self.deadline:
            result.stopped = f"the search stopped at its {self.deadline - self.started:.1f} s"
            return False
        open_ = [n for n, e in result.evidence.items()
                 if not e.refuted and self.taken[n] < PER_SOURCE]
        if not open_ or self.looked >= DRAWS:
            return False
        if trial.features is not None and not any(
                self.hypotheses[n].relevant(trial.features) for n in open_):
            return True
        self.looked += 1
        result.looked += 1
        said: dict[str, tuple[bool | None, str]] = {}
        if self.memo is not None:
            said = {n: self.memo[key] for n in open_
                    if (key := (trial.key, n, self.ulps, self.zero_signs)) in self.memo}
        pending = [n for n in open_ if n not in said]
        if pending:
            said.update(self._run(trial, pending))
        for n, (verdict, detail) in said.items():
            if verdict:
                result.evidence[n].support.append(trial.label)
                self.taken[n] += 1
            elif verdict is None and detail == SILENT:
                result.evidence[n].silent.append(trial.label)
            elif verdict is False:
                result.evidence[n].against = f"{trial.label} ({detail})"
        return True

    def _run(self, trial: Trial, names: list[str]) -> dict[str, tuple[bool | None, str]]:
        """Each hypothesis's verdict on `trial`: the implementation is run only where one of
        them departs from the spec."""
        ulps = self.ulps
        said: dict[str, tuple[bool | None, str]] = {}
        want = trial.outcome(None)
        theirs: dict[str, Outcome] = {}
        if want is not None:
            theirs = {n: o for n in names
                      if (o := trial.outcome(self.hypotheses[n].semantics)) is not None and
                      compare(want, o, ulps=ulps) is not None}  # the separated ones
        got = None
        if theirs and want is not None:
            got = trial.implementation()
            self.result.ran += 1
        for n in names:
            if got is not None and want is not None and n not in theirs and \
                    departs_alone(want, got, ulps, self.zero_signs):
                said[n] = (None, SILENT)
            elif got is None or n not in theirs or want is None:
                said[n] = (None, "")
            elif (verdict := bears_out(want, theirs[n], got, ulps,
                                       zero_signs=self.zero_signs)) is None:
                said[n] = (None, "")
            elif verdict:
                # Accepting what the spec rejects, on a program that stores nothing computed
                # from the gradient, shows the status alone: no evidence for a variant, which
                # also says what the gradient is (the variant's values are compared where
                # some stored value depends on them).
                status_only = want.status != "ok" and theirs[n].status == "ok" and \
                    trial.gradient_unseen
                said[n] = (None, "") if status_only else (True, "")
            else:
                said[n] = (False, _detail(theirs[n], got, ulps, self.zero_signs))
            if self.memo is not None and trial.key is not None:
                self.memo[(trial.key, n, ulps, self.zero_signs)] = said[n]
        return said


def uncontrolled(name: str, reading: Reading, buffers, want: Outcome, got: Outcome, impl,
                 ulps: int) -> str:
    """Why the variant `name`, which reads a decision of SPEC.md otherwise, is not what the
    implementation's outcome depends on: on its control program (the found one rewritten so
    that the decision cannot matter, Variant.control) the implementation still departs from
    the spec where it departed on the found one; '' where it does not, or where the variant
    has no control program to run. docs/diagnosis.md, "Decisions"."""
    control = CATALOGUE[name].control if name in CATALOGUE else None
    found = compare(want, got, ulps=ulps)
    if control is None or found is None or reading.statements is None:
        return ""
    source = control(reading.source)
    again = Reading(source, measure=False)
    if source == reading.source or again.statements is None:
        return ""
    build_only = got.status == "ok" and not got.buffers
    theirs = impl.build_only(source) if build_only else \
        impl.run_case(source, buffers, again.slots)
    still = compare(again.outcome(buffers, build_only=build_only), theirs, ulps=ulps)
    if still is None or not ((not found.differing and still.kind == found.kind) or
                             still.differing & found.differing):
        return ""
    return ("the control program, the found one rewritten so that the decision cannot "
            f"matter, on which the implementation still departs from the spec ({still})")


# --- the sources of programs ----------------------------------------------------------------


@dataclass
class _Source:
    """Programs to try: `feed(visit)` calls `visit` with each Trial until it says stop.
    `shared`: the same programs for every divergence of the run (what the implementation
    did on them is kept, and not asked again)."""

    feed: Callable[[Callable[[Trial], bool]], None]
    shared: bool


def _listed(trials: Iterable[Trial | None]) -> Callable[[Callable[[Trial], bool]], None]:
    def feed(visit: Callable[[Trial], bool]) -> None:
        for trial in trials:
            if trial is not None and not visit(trial):
                return
    return feed


def _drawn_into(strategy, deadline: float, trial_of) -> Callable[[Callable[[Trial], bool]], None]:
    """A source of examples of `strategy`, derandomized (the same each run), DRAWS at most,
    each made a Trial by `trial_of(k, example)` (None: not one to send) and visited as it is
    drawn: Hypothesis drives the test function, which ends the drawing by raising."""
    def feed(visit: Callable[[Trial], bool]) -> None:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis.errors import HypothesisException

        drawn = [0]

        @settings(max_examples=DRAWS, database=None, derandomize=True, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(example):
            if time.monotonic() >= deadline:
                raise _Enough
            drawn[0] += 1
            trial = trial_of(drawn[0], example)
            if trial is not None and not visit(trial):
                raise _Enough

        try:
            collect()
        except _Enough:
            pass
        except HypothesisException:  # a program whose inputs it cannot draw (too large):
            pass  # this source has none to give; the others may
    return feed


class _Enough(BaseException):
    """Ends a drawing: no Exception, so Hypothesis lets it through rather than report it as
    a failure of the drawing."""


def _sources(finding: Finding, impl, library: CaseFiles, deadline: float) -> list[_Source]:
    """The sources of the experiment's programs, nearest first."""
    case = finding.case
    if isinstance(case, TapeCase):
        from hypothesis import strategies as st

        from gradient_conformance.generators.tapes import order_sensitive_tapes, tapes
        return [
            _Source(_listed(_tape_trial(label, label, tape, impl)
                            for label, tape in library.tapes()), shared=True),
            _Source(_listed(_tape_trial(label, label, tape, impl)
                            for label, tape in library.enumerated_tapes()), shared=True),
            _Source(_drawn_into(
                st.one_of(tapes(), order_sensitive_tapes()), deadline,
                lambda k, drawn: None if drawn.expect_error is not None else _tape_trial(
                    f"drawn tape {k}", f"a drawn tape of {len(drawn.tape)} entries",
                    drawn.tape, impl)), shared=True)]
    build_only = finding.got.status == "ok" and not finding.got.buffers

    def trial(key, label: str, reading: Reading, buffers, only_built: bool = build_only
              ) -> Trial | None:
        return _program_trial(key, label, reading, buffers, impl, only_built)
    sources = []
    missed = finding.rule in RULES  # a rejection the implementation missed
    # A missed rejection whose program stores nothing of its gradient is tried with the
    # gradient stored (gradients_shown), and run whole: what the implementation computes
    # there is the evidence a variant needs, not only that it accepted.
    shown = gradients_shown(case.reading, case.buffers) if missed else None
    stored = shown is not None and shown[2] != ""
    reading = shown[0] if shown else case.reading
    # Inputs Hypothesis can draw whole: a program of more (an enumerated one, of every class
    # at once) gets none refilled, and goes on to the other sources at once.
    elements = sum(math.prod(shape) for _, shape in reading.slots.values())
    if (not build_only or shown) and reading.statements is not None and reading.slots and \
            elements <= REFILL_ELEMENTS:
        from hypothesis import strategies as st

        from gradient_conformance.generators.buffers import fill
        statements = reading.statements

        @st.composite
        def refilled(draw):
            mode = draw(st.sampled_from(("anything", "smooth")))
            return fill(draw, statements, mode=mode).buffers
        again = Reading(reading.source, statements, measure=False)
        label = "other inputs of the found program" + (", its gradient stored" * stored)
        sources.append(_Source(_drawn_into(
            refilled(), deadline,
            lambda k, buffers: trial(None, label, again, buffers, False)), shared=False))

    # The other programs are run whole wherever they have inputs, even for a divergence that
    # showed at build: a variant that accepts a rejected gradient also says what it computes,
    # and evidence on the status alone confirms nothing (docs/diagnosis.md, "Confirmation").
    def listed() -> Iterable[Trial | None]:
        programs = library.shown() if missed else \
            [(label, r, b, False) for label, r, b in library.programs()]
        for label, r, b, shown in programs:
            if shown:  # run whole, its gradient shown (gradients_shown)
                yield trial((label, "shown"), label, r, b, False)
            else:
                yield trial((label, build_only and not b), label, r, b, build_only and not b)

    def drawn(k, case) -> Trial | None:
        r = Reading(case.source, case.parsed or (), measure=False)
        lines = f"a drawn program of {len(case.source.splitlines())} lines"
        if missed and (more := gradients_shown(r, case.buffers)) is not None:
            return trial(None, lines + more[2], more[0], more[1], False)
        return trial((f"drawn {k}", build_only and not case.buffers), lines, r, case.buffers,
                     build_only and not case.buffers)
    sources.append(_Source(_listed(listed()), shared=True))
    sources.append(_Source(_drawn_into(_program_strategy(), deadline, drawn), shared=True))
    return sources


def _program_strategy():
    """Programs drawn from the generators: valid ones of every op, differentiable ones
    (smooth and on any input), ones whose shares are summed in an order that matters, and
    gradients the spec rejects with their near misses."""
    from hypothesis import strategies as st

    from gradient_conformance.generators.order import order_sensitive_gradients
    from gradient_conformance.generators.programs import differentiable_programs, programs
    from gradient_conformance.generators.rejections import invalid_gradients, near_misses
    return st.one_of(programs(), differentiable_programs(),
                     differentiable_programs(inputs="anything"), order_sensitive_gradients(),
                     invalid_gradients(), near_misses())


def _program_trial(key, label: str, reading: Reading, buffers, impl,
                   build_only: bool) -> Trial | None:
    """A program as the check would send it: not one that uses what the implementation
    declares unsupported, nor one at which it declares that integer division traps."""
    if reading.statements is None or unsupported_by(impl, reading) or \
            trapped_by(impl, reading, buffers):
        return None

    def outcome(semantics: Semantics | None) -> Outcome | None:
        try:
            if semantics is None:
                return reading.outcome(buffers, build_only=build_only)
            return reading.outcome(buffers, semantics, build_only=build_only)
        except Exception:  # noqa: BLE001 - a variant that does not apply here says nothing
            return None

    def implementation() -> Outcome:
        if build_only:
            return impl.build_only(reading.source)
        return impl.run_case(reading.source, buffers, reading.slots)

    problem = rejection(reading)
    unseen = isinstance(problem, GradientError) and \
        (build_only or not stores_a_gradient(reading.statements or (), problem.line))
    return Trial(key, label, reading.reaches, outcome, implementation, unseen)


def _tape_trial(key, label: str, tape, impl) -> Trial:
    def outcome(semantics: Semantics | None) -> Outcome | None:
        try:
            bits = backprop_bits(tape) if semantics is None else backprop_bits(tape, semantics)
        except Exception:  # noqa: BLE001 - a tape the variant cannot walk says nothing
            return None
        return Outcome("ok", derivatives=bits)

    return Trial(key, label, None, outcome, lambda: impl.run_backprop(tape))


def _scattered(n: int) -> list[int]:
    """0 to n - 1 in a fixed order that spreads over the range: by a step prime to n."""
    step = next(s for s in (97, 89, 83, 79, 73, 71, 67, 61, 59, 53, 47, 43, 41, 37, 31, 29,
                            23, 19, 17, 13, 11, 7, 5, 3, 2, 1) if n % s or s == 1)
    return [(k * step) % n for k in range(n)]


class CaseFiles:
    """The case files the package ships, each read once (a run's explainer keeps one of
    these), and `memo`: what the implementation did on the programs every divergence's
    experiment shares, (program, hypothesis, ulps) -> (verdict, how it differed)."""

    def __init__(self):
        self._programs: list[tuple[str, Reading, dict]] | None = None
        self._shown: list[tuple[str, Reading, dict, bool]] | None = None
        self._tapes: list[tuple[str, list]] | None = None
        self._enumerated: list[tuple[str, list]] | None = None
        self.memo: dict = {}

    def programs(self) -> list[tuple[str, Reading, dict]]:
        if self._programs is None:
            root, self._programs = resource("cases"), []
            for path in cases.case_paths([root]):
                if path.suffix != ".ir":
                    continue
                try:
                    case = cases.load_case(path)
                except (OSError, ValueError):
                    continue
                reading = Reading(case.source, measure=False)
                if reading.statements is None:
                    continue
                self._programs.append((f"case file {path.relative_to(root).as_posix()}",
                                       reading, cases.initial_buffers(case, reading.slots)))
        return self._programs

    def shown(self) -> list[tuple[str, Reading, dict, bool]]:
        """The programs as a missed rejection's experiment takes them, made once for the
        run: each the spec rejects by a rule made to show its gradient (`gradients_shown`,
        labelled with what was changed; True), the others as they are (False)."""
        if self._shown is None:
            self._shown = [(label + more[2], more[0], more[1], True)
                           if (more := gradients_shown(r, b)) is not None
                           else (label, r, b, False) for label, r, b in self.programs()]
        return self._shown

    def enumerated_tapes(self) -> list[tuple[str, list]]:
        """Each row of the enumerated tapes (generators/tapes.py) as a tape of its own, a
        row of each enumerated tape in turn (the fan-in tapes first, where the orders of a
        walk and of a sum part), each tape's rows taken in a scattered order: an experiment
        looks at a few hundred, and those few meet every structure and pattern early."""
        if self._enumerated is None:
            from gradient_conformance.generators.tapes import tape_fan_in_cases, tape_rule_cases
            found = [(case, _scattered(len(case.rows)))
                     for case in (*tape_fan_in_cases(), *tape_rule_cases())]
            self._enumerated = [(f"enumerated tape {case.name}, row {order[k] + 1}",
                                 case.narrowed([order[k]]).tape)
                                for k in range(max(len(o) for _, o in found))
                                for case, order in found if k < len(order)]
        return self._enumerated

    def tapes(self) -> list[tuple[str, list]]:
        if self._tapes is None:
            root, self._tapes = resource("cases", "tapes"), []
            for path in sorted(root.glob("*.json")):
                try:
                    self._tapes.append((f"tape case file {path.name}",
                                        load_tape_case(path.read_text())["tape"]))
                except (OSError, ValueError, KeyError, TypeError):
                    continue
        return self._tapes
