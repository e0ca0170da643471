"""Explaining divergences: a stage of its own, after the check and before the commands that
print. docs/diagnosis.md, "Diagnosis".

A check only records what it found (conformance/findings.py, `Finding`), and `describe`
(conformance/divergence.py) only builds the record. `Explainer.explain` then says what the
implementation did: diagnosis first (which variants of the spec reproduce the outcome, under
the check's own comparison), then location (the statement where it departs, probed through
the implementation, with the diagnosis's variants to decide between places). A program and a
tape are the two kinds of case: `explain_finding` takes either.

Which divergences are explained, and within what time, is the failure stage's to decide
(conformance/failure.py: one key for the same divergence, one budget for reducing and
explaining); once the budget is spent, a divergence is recorded without explanation, saying
so.

`across` is the run's verdict: for each variant, how many of the run's divergences it
explains, the one that explains the most first; `prefer` puts that variant first in each
divergence that names it.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from gradient_conformance.conformance.diagnosis.confirm import (
    SECONDS,
    CaseFiles,
    experiment,
    hypothesis_of,
    uncontrolled,
)
from gradient_conformance.conformance.diagnosis.diagnose import (
    Diagnosis,
    decisions_of,
    diagnose_case,
    diagnose_tape,
)
from gradient_conformance.conformance.diagnosis.locate import Location, locate, locate_tape
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.findings import Finding, TapeCase
from gradient_conformance.conformance.transports.loading import Abandoned

BUDGET = 600.0  # seconds a run may spend reducing and explaining divergences, in all


@dataclass
class Budget:
    """Seconds of the run for reducing and explaining divergences, and those spent: one
    budget, which the failure stage (conformance/failure.py) shares between the two."""

    seconds: float = BUDGET
    spent: float = 0.0

    @property
    def left(self) -> float:
        return max(self.seconds - self.spent, 0.0)

    def deadline(self) -> float:
        """The time.monotonic() at which what is left runs out."""
        return time.monotonic() + self.left

    @property
    def spent_reason(self) -> str:
        """Why a divergence was not reduced, or not explained, once nothing is left."""
        return f"the run spent its {self.seconds:.0f} s for reducing and explaining divergences"


def explain_finding(finding: Finding, impl=None, *, deadline: float | None = None,
                    library: CaseFiles | None = None) -> tuple[Diagnosis, Location]:
    """The diagnosis and the location of one finding, a program's or a tape's; `impl` is
    asked what the experiment on the diagnosis's hypotheses and the location must ask it,
    by `deadline` (a time.monotonic(); default: the experiment's own SECONDS)."""
    deadline = deadline if deadline is not None else time.monotonic() + SECONDS
    case = finding.case
    if isinstance(case, TapeCase):
        diagnosis = diagnose_tape(case.tape, finding.want, finding.got)
        try:
            tested(diagnosis, finding, impl, deadline, library)
        except Abandoned as stopped:
            diagnosis = Diagnosis(reason=f"not verified: {stopped}")
        location = locate_tape(case.tape, finding.want, finding.got, diagnosis.variants) \
            if isinstance(case.tape, list) else Location(reason="the tape is not a list")
        return diagnosis, location
    if not case.reading.statements:
        reason = "the program does not parse: there is nothing to re-run or probe"
        return Diagnosis(reason=reason), Location(reason=reason)
    try:
        diagnosis = diagnose_case(case.reading, case.buffers, finding.want, finding.got,
                                  ulps=finding.ulps, impl=impl)
        tested(diagnosis, finding, impl, deadline, library)
        # A decision the expectation rests on is said only where the implementation's
        # outcome depends on it: its variant confirmed, alone or in a pair, like any other.
        named = set(diagnosis.variants) | {n for pair in diagnosis.pairs for n in pair}
        diagnosis.decisions = [n for n in decisions_of(
            case.reading, case.buffers, finding.want,
            build_only=finding.got.status == "ok" and not finding.got.buffers) if n in named]
    except Abandoned as stopped:
        diagnosis = Diagnosis(reason=f"not verified: {stopped}")
    if impl is None:
        return diagnosis, Location(reason="no implementation to ask (a divergence described "
                                   "from its record alone)")
    try:
        location = locate(impl, case.reading, case.buffers, finding.want, finding.got,
                          rule=finding.rule, ulps=finding.ulps,
                          variants=diagnosis.variants or sorted(
                              {n for pair in diagnosis.pairs for n in pair}))
    except Abandoned as stopped:
        location = Location(reason=f"not probed: {stopped}")
    return diagnosis, location


def tested(diagnosis: Diagnosis, finding: Finding, impl, deadline: float,
           library: CaseFiles | None = None) -> None:
    """Keep named in `diagnosis` only the hypotheses (its variants and pairs) that the
    experiment confirms on other programs (docs/diagnosis.md, "Confirmation"); each one's
    evidence goes on the diagnosis. Without an implementation to run, none is confirmed."""
    hypotheses = {n: hypothesis_of(n) for n in diagnosis.variants}
    hypotheses.update({"+".join(pair): hypothesis_of(*pair) for pair in diagnosis.pairs})
    if not hypotheses:
        return
    diagnosis.candidates = list(hypotheses)
    confirmed: set[str] = set()
    if impl is not None:
        result = experiment(hypotheses, finding, impl, deadline=deadline, library=library)
        confirmed = set(result.confirmed()) - _subsumed(result)
        confirmed -= _controlled(confirmed, result, finding, impl)
        diagnosis.evidence = [e.to_dict() for e in result.evidence.values()]
        diagnosis.experiment = {"looked": result.looked, "ran": result.ran,
                                "seconds": round(result.seconds, 3), "stopped": result.stopped}
        diagnosis.seconds += result.seconds  # what the diagnosis cost, its experiment too
    diagnosis.variants = [n for n in diagnosis.variants if n in confirmed]
    diagnosis.pairs = [p for p in diagnosis.pairs if "+".join(p) in confirmed]


def _controlled(confirmed: set[str], result, finding: Finding, impl) -> set[str]:
    """The confirmed variants reading a decision otherwise whose control program the
    implementation still departs on (confirm.uncontrolled): its outcome does not depend on
    the decision (docs/diagnosis.md, "Decisions"). Each one's evidence says so."""
    case = finding.case
    if isinstance(case, TapeCase):
        return set()
    spent = set()
    for name in sorted(confirmed):
        said = uncontrolled(name, case.reading, case.buffers, finding.want, finding.got, impl,
                            finding.ulps)
        if said:
            result.evidence[name].against = said
            spent.add(name)
    return spent


def _subsumed(result) -> set[str]:
    """The confirmed hypotheses another confirmed one explains more than: it is borne out on
    a program where this one keeps the spec's values and the implementation does not
    (Evidence.silent), and not the other way round. Each one's evidence says by which."""
    evidence = {n: e for n, e in result.evidence.items() if e.confirmed}

    def beyond(a: str, b: str) -> str | None:  # a program a explains and b does not
        return next((p for p in evidence[a].support if p in evidence[b].silent), None)
    dropped = set()
    for b in evidence:
        for a in evidence:
            if a != b and (shown := beyond(a, b)) is not None and beyond(b, a) is None:
                evidence[b].subsumed = f"{a} ({shown})"
                dropped.add(b)
                break
    return dropped


class Explainer:
    """The explanation of divergences, within a budget of time (shared with the reducer,
    when the failure stage gives one)."""

    def __init__(self, budget: Budget | None = None):
        self.budget = budget if budget is not None else Budget()
        self.library = CaseFiles()  # the experiment's case files, read once per run

    def explain(self, d, finding: Finding, impl=None) -> None:
        """Fill in `d`'s diagnosis and location (a reports.records.Divergence), or say why
        they are not there."""
        if self.budget.left <= 0:
            self.without(d, f"not explained: {self.budget.spent_reason}")
            return
        started = time.monotonic()
        # The experiment takes its own SECONDS from when it starts (confirm.experiment), so
        # that re-running the catalogue on a large program does not eat into it.
        diagnosis, location = explain_finding(finding, impl, deadline=self.budget.deadline(),
                                              library=self.library)
        self.budget.spent += time.monotonic() - started
        d.diagnosis, d.diagnosis_line = diagnosis.to_dict(), diagnosis.line()
        d.location, d.location_line = location.to_dict(), location.text()

    @staticmethod
    def without(d, reason: str) -> None:
        d.diagnosis, d.diagnosis_line = {"reason": reason}, f"diagnosis: none ({reason})"
        d.location, d.location_line = {"reason": reason}, f"location: none ({reason})"


def across(divergences) -> list[tuple[str, int]]:
    """(variant, how many of the divergences it explains alone), most first, then by
    name: the run's verdict (docs/diagnosis.md, "Diagnosis")."""
    counts: Counter[str] = Counter()
    for d in divergences:
        counts.update(_names((d.diagnosis or {}).get("variants", [])))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def prefer(divergences) -> None:
    """Put first, in each divergence's diagnosis, the variant that explains the most of the
    run's divergences (each named variant reproduces that divergence alone, so the order is
    only which the reader sees first)."""
    rank = {name: k for k, (name, _) in enumerate(across(divergences))}
    for d in divergences:
        kept = d.diagnosis or {}
        named = kept.get("variants")
        if not (isinstance(named, list) and len(named) > 1 and
                all(isinstance(n, dict) and n.get("name") in CATALOGUE for n in named)):
            continue
        named.sort(key=lambda n: rank.get(n["name"], len(rank)))
        d.diagnosis_line = Diagnosis.from_dict(kept, [n["name"] for n in named]).line()


def verdict_lines(divergences, shown: int = 3) -> list[str]:
    """The run's verdict, for the end of the terminal output: the crashes, one line per
    cause (docs/diagnosis.md, "Crashes"); the variants that explain the most divergences
    (each with where those divergences were located), then the pairs; then how many no
    variant explains. Each divergence is counted on one line (a divergence several variants
    reproduce, under the first its diagnosis names), so that the lines add up to the run's
    divergences; what is not shown by name is one line of its own."""
    from gradient_conformance.reports.records import crash_causes
    divergences = list(divergences)
    total = len(divergences)
    if not total:
        return []
    # Crashes first: each exception type raised at one place of the implementation's code is
    # one cause, whatever the programs (docs/diagnosis.md, "Crashes").
    causes = crash_causes(divergences)
    lines = [f"{len(ks)} divergence{'s' if len(ks) != 1 else ''}: {kind} at {place} "
             f"({message[:200]})" for (kind, place), message, ks in causes]
    crashed = {k for _, _, ks in causes for k in ks}
    first: dict[str, list] = {}
    also: Counter[str] = Counter()
    pairs: dict[str, list] = {}
    unexplained = []
    for k, d in enumerate(divergences, start=1):
        if k in crashed:
            continue
        names = _names((d.diagnosis or {}).get("variants", []))
        if names:
            first.setdefault(names[0], []).append(d)
            also.update(names[1:])
            continue
        for pair in (d.diagnosis or {}).get("pairs", [])[:1]:
            named = _names(pair) if isinstance(pair, list) else []
            if len(named) == 2:  # one pair whichever order a diagnosis gave it in
                pairs.setdefault(" and ".join(sorted(named)), []).append(d)
                break
        else:
            unexplained.append(d)
    ranked = sorted(first.items(), key=lambda item: (-len(item[1]), item[0]))
    for name, explained in ranked[:shown]:
        says = CATALOGUE[name].says if name in CATALOGUE else ""
        places: Counter[str] = Counter()
        for d in explained:
            where = d.location or {}
            if where.get("line"):
                places[f"{where.get('kind')} at `{where.get('op')}`"] += 1
        located = "; ".join(f"{place} ({n})" for place, n in places.most_common(3))
        more = (f" (and reproduces {also[name]} more, named after another variant there)"
                if also[name] else "")
        lines.append(f"{name} explains {len(explained)} of {total} divergences{more}: the "
                     f"spec, but one that {says}" + (f"; located: {located}" if located else ""))
    if len(ranked) > shown:
        rest = ranked[shown:]
        lines.append(f"{sum(len(ds) for _, ds in rest)} of {total} divergences are explained "
                     f"by {len(rest)} other variants: "
                     + ", ".join(f"{name} ({len(ds)})" for name, ds in rest))
    ranked_pairs = sorted(pairs.items(), key=lambda item: (-len(item[1]), item[0]))
    for both, explained in ranked_pairs[:shown]:
        lines.append(f"{both} together explain {len(explained)} of {total} divergences that "
                     "no variant explains alone")
    if len(ranked_pairs) > shown:
        rest = ranked_pairs[shown:]
        lines.append(f"{sum(len(ds) for _, ds in rest)} of {total} divergences are explained "
                     f"by {len(rest)} other pairs")
    if unexplained:
        at_a_line = sum(1 for d in unexplained if (d.location or {}).get("line"))
        lines.append(f"{len(unexplained)} of {total} divergences no known variant explains "
                     f"alone or in a pair{', and no crash' if crashed else ''}; {at_a_line} "
                     "of them located at a statement")
    return lines


def _names(named) -> list[str]:
    """The variant names of a diagnosis's list of named variants (records: data to check)."""
    return [n["name"] for n in named if isinstance(n, dict) and isinstance(n.get("name"), str)] \
        if isinstance(named, list) else []
