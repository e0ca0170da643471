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
  the spec (`bears_out`; an element where only the implementation departs is another
  cause's, so a second fault does not refute a right hypothesis);
- **refuted** when the implementation did otherwise on one (where two hypotheses differ
  from each other, a program separating either tells them apart the same way);
- **unconfirmed** when no separating program was found within the search.

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

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gradient_conformance import resource
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.running import Finding, Reading, TapeCase, traps
from gradient_conformance.reference import cases
from gradient_conformance.reference.semantics import Semantics
from gradient_conformance.reference.tape import backprop_bits, load_tape_case

PER_SOURCE = 2  # separating programs a hypothesis is run on from each source, at most
DRAWS = 120  # programs (or inputs) drawn, and programs looked at, from each source, at most
SECONDS = 8.0  # the experiment on one divergence, at most


@dataclass
class Evidence:
    """What the experiment found for one hypothesis: the separating programs on which the
    implementation gave its results (`support`, each named by where it came from), and the
    first program on which the implementation did otherwise (`against`: where it came from
    and how the results differed), if any."""

    name: str
    support: list[str] = field(default_factory=list)
    against: str = ""

    @property
    def confirmed(self) -> bool:
        return bool(self.support) and not self.against

    @property
    def refuted(self) -> bool:
        return bool(self.against)

    def to_dict(self) -> dict:
        return {"name": self.name, "support": list(self.support), "against": self.against}


@dataclass(frozen=True)
class Hypothesis:
    """The implementation is the spec under `semantics`; `relevant(features)` says whether
    a program with those features can tell it from the spec (variants.applies)."""

    semantics: Semantics
    relevant: Callable[[frozenset[str]], bool]


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
    """A program of the experiment: where it came from, its features (None for a tape), its
    outcome under a semantics (None: the spec's; None back: the semantics cannot express
    it), and its outcome on the implementation."""

    label: str
    features: frozenset[str] | None
    outcome: Callable[[Semantics | None], Outcome | None]
    implementation: Callable[[], Outcome]


def bears_out(spec: Outcome, theirs: Outcome, got: Outcome, ulps: int) -> bool | None:
    """Whether the implementation's outcome `got` bears out the hypothesis, whose outcome is
    `theirs`, where it departs from the spec's (`spec`): None where it does not depart (the
    program says nothing of it); else True when the implementation gives the hypothesis's
    status and, at every element where the hypothesis departs from the spec, its value,
    compared as the check compares (`ulps`). An element where only the implementation
    departs is another cause's (a second fault), not evidence against this one."""
    departs = compare(spec, theirs, ulps=ulps)
    if departs is None:
        return None
    mismatch = compare(theirs, got, ulps=ulps)
    if mismatch is None:
        return True
    if spec.status != "ok" or theirs.status != "ok" or got.status != "ok" or \
            mismatch.kind == "missing" or not departs.differing:
        return False  # a status, or a shape: the whole outcome is the hypothesis's claim
    return not mismatch.differing & departs.differing


def _detail(theirs: Outcome, got: Outcome, ulps: int) -> str:
    difference = compare(theirs, got, ulps=ulps)
    if difference is None:
        return ""
    return str(difference).replace("expected", "hypothesis").replace("got", "implementation")


def experiment(hypotheses: dict[str, Hypothesis], finding: Finding, impl, *,
               deadline: float, library: CaseFiles | None = None) -> Experiment:
    """Run the experiment (this module's docstring) on `hypotheses` for the divergence
    `finding`, by `deadline` (a time.monotonic()) at the latest. `library`: the case files,
    read once per run."""
    started = time.monotonic()
    deadline = min(deadline, started + SECONDS)
    result = Experiment({name: Evidence(name) for name in hypotheses})
    library = library if library is not None else CaseFiles()
    ulps = finding.ulps
    for source in _sources(finding, impl, library, deadline):
        taken = dict.fromkeys(hypotheses, 0)  # separating programs from this source
        looked = 0  # programs of this source that could tell an open hypothesis apart
        for trial in source:
            if time.monotonic() >= deadline:
                result.stopped = f"the search stopped at its {deadline - started:.1f} s"
                break
            open_ = [n for n, e in result.evidence.items()
                     if not e.refuted and taken[n] < PER_SOURCE]
            if not open_ or looked >= DRAWS:
                break
            if trial.features is not None and not any(
                    hypotheses[n].relevant(trial.features) for n in open_):
                continue
            looked += 1
            result.looked += 1
            want = trial.outcome(None)
            if want is None:
                continue
            theirs = {n: o for n in open_
                      if (o := trial.outcome(hypotheses[n].semantics)) is not None and
                      compare(want, o, ulps=ulps) is not None}  # the separated ones
            if not theirs:
                continue
            got = trial.implementation()
            result.ran += 1
            for n, o in theirs.items():
                if bears_out(want, o, got, ulps):
                    result.evidence[n].support.append(trial.label)
                    taken[n] += 1
                else:
                    result.evidence[n].against = f"{trial.label} ({_detail(o, got, ulps)})"
        if result.stopped or all(e.refuted for e in result.evidence.values()):
            break
    result.seconds = time.monotonic() - started
    return result


# --- the sources of programs ----------------------------------------------------------------


def _sources(finding: Finding, impl, library: CaseFiles,
             deadline: float) -> Iterator[Iterator[Trial]]:
    """The sources of the experiment's programs, nearest first, each an iterator of Trials
    made as they are asked for."""
    case = finding.case
    if isinstance(case, TapeCase):
        yield (_tape_trial(label, tape, impl) for label, tape in _tape_files())
        yield (_tape_trial(label, tape, impl) for label, tape in _drawn_tapes(deadline))
        return
    build_only = finding.got.status == "ok" and not finding.got.buffers

    def trials(programs) -> Iterator[Trial]:
        for label, reading, buffers in programs:
            trial = _program_trial(label, reading, buffers, impl, build_only)
            if trial is not None:
                yield trial
    if not build_only:
        yield trials(_refills(case.reading, deadline))
    yield trials(library.programs())
    yield trials(_drawn(deadline))


def _program_trial(label: str, reading: Reading, buffers, impl,
                   build_only: bool) -> Trial | None:
    """A program as the check would send it: not one that uses what the implementation
    declares unsupported, nor one at which it declares that integer division traps."""
    if reading.statements is None or reading.uses & impl.unsupported() or \
            traps(impl, reading, buffers):
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

    return Trial(label, reading.features, outcome, implementation)


def _refills(reading: Reading, deadline: float) -> Iterator[tuple[str, Reading, dict]]:
    """The found program with other initial contents, drawn as the generators draw them:
    on the whole f32 range, or smooth."""
    if reading.statements is None or not reading.slots:
        return
    from hypothesis import strategies as st

    from gradient_conformance.generators.buffers import fill

    statements = reading.statements

    @st.composite
    def refilled(draw):
        mode = draw(st.sampled_from(("anything", "smooth")))
        return fill(draw, statements, mode=mode).buffers

    again = Reading(reading.source, statements, measure=False)
    for buffers in _draws(refilled(), deadline):
        yield "other inputs of the found program", again, buffers


class CaseFiles:
    """The program case files the package ships, each read once (a run's explainer keeps
    one of these) and run on its own initial contents."""

    def __init__(self):
        self._programs: list[tuple[str, Reading, dict]] | None = None

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


def _drawn(deadline: float) -> Iterator[tuple[str, Reading, dict]]:
    """Programs drawn from the generators: valid ones of every op, differentiable ones
    (smooth and on any input), ones whose shares are summed in an order that matters, and
    gradients the spec rejects with their near misses."""
    from hypothesis import strategies as st

    from gradient_conformance.generators.order import order_sensitive_gradients
    from gradient_conformance.generators.programs import differentiable_programs, programs
    from gradient_conformance.generators.rejections import invalid_gradients, near_misses
    strategy = st.one_of(programs(), differentiable_programs(),
                         differentiable_programs(inputs="anything"),
                         order_sensitive_gradients(), invalid_gradients(), near_misses())
    for case in _draws(strategy, deadline):
        reading = Reading(case.source, case.parsed or (), measure=False)
        yield (f"a drawn program of {len(case.source.splitlines())} lines", reading,
               case.buffers)


def _tape_files() -> Iterator[tuple[str, list]]:
    root = resource("cases", "tapes")
    for path in sorted(root.glob("*.json")):
        try:
            tape = load_tape_case(path.read_text())["tape"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        yield f"tape case file {path.name}", tape


def _drawn_tapes(deadline: float) -> Iterator[tuple[str, list]]:
    """Drawn tapes: valid ones, and ones whose shares' order matters."""
    from hypothesis import strategies as st

    from gradient_conformance.generators.tapes import order_sensitive_tapes, tapes
    for drawn in _draws(st.one_of(tapes(), order_sensitive_tapes()), deadline):
        if drawn.expect_error is None:
            yield f"a drawn tape of {len(drawn.tape)} entries", drawn.tape


def _tape_trial(label: str, tape, impl) -> Trial:
    def outcome(semantics: Semantics | None) -> Outcome | None:
        try:
            bits = backprop_bits(tape) if semantics is None else backprop_bits(tape, semantics)
        except Exception:  # noqa: BLE001 - a tape the variant cannot walk says nothing
            return None
        return Outcome("ok", derivatives=bits)

    return Trial(label, None, outcome, lambda: impl.run_backprop(tape))


class _Enough(BaseException):
    """Ends a drawing at its deadline: no Exception, so Hypothesis lets it through rather
    than report it as a failure of the drawing."""


def _draws(strategy, deadline: float) -> Iterator:
    """Examples of `strategy`, derandomized (the same each run): DRAWS at most, fewer if the
    deadline comes first. Drawn when the first is asked for, all at once: Hypothesis drives
    a test function, which cannot be resumed."""
    from hypothesis import HealthCheck, Phase, given, settings

    drawn: list = []

    @settings(max_examples=DRAWS, database=None, derandomize=True, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example):
        if time.monotonic() >= deadline:
            raise _Enough
        drawn.append(example)

    try:
        collect()
    except _Enough:
        pass
    yield from drawn
