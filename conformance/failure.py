"""What follows a check's divergence, in order and outside pytest's hooks: reduce, explain,
decide known, save, look again. docs/diagnosis.md, "The failure stage".

A check only raises what it found (`findings.Diverged`, carrying a `Finding`). The stage runs
where the check runs, as part of its call (`after_check`, from the plugin's
`pytest_pyfunc_call`): its time is the check's, and a bug of its own (the reducer's, an
experiment's, the locator's) is said on the divergence it was working on, which is then
reported as found, and the run goes on; pytest's report hooks only serialise what it
returned. Nothing here knows of pytest's reports. For each of the check's findings, in order:

1. **reduce** it (conformance/reduce.py), unless the run does not shrink;
2. **describe** it (conformance/divergence.py) and **explain** it (conformance/explain.py:
   diagnosis, then location);
3. **save** it as a case file, where the run keeps them;
4. **decide known**: which of the check's divergences a --known entry expects
   (conformance/known.py), and whether anything new is left.

A generated check that failed first **looks again** (`look_again`), so that a second bug of
the same check is found rather than hidden by the first.

One key says "the same divergence" (`same`): the test that found it and its subject, what
differs and how (divergence.subject). The second look passes over a finding whose key it has,
and a finding whose key the run has seen is neither reduced nor explained again. One budget
(`Budget`), in seconds of the run, covers reduction and explanation together.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gradient_conformance.conformance import divergence
from gradient_conformance.conformance.diagnosis.confirm import experiment, hypothesis_of
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.explain import Budget, Explainer
from gradient_conformance.conformance.findings import Diverged, Finding
from gradient_conformance.conformance.known import named_variants
from gradient_conformance.conformance.options import MORE_LOOKS
from gradient_conformance.conformance.reduce import Reduction, reduce_finding
from gradient_conformance.conformance.tallies import Tally
from gradient_conformance.conformance.transports.loading import Abandoned

if TYPE_CHECKING:
    from gradient_conformance.conformance.known import Known
    from gradient_conformance.reports.records import Divergence


def same(test_id: str, finding: Finding) -> tuple[str, ...]:
    """The one key of "the same divergence": the test that found it, and its subject."""
    return (test_id, *divergence.subject(finding))


def diverged(error: BaseException | None) -> Diverged | None:
    """The divergence a check raised: the error itself, or (when Hypothesis found several
    distinct failures and raised them as a group) the first of the group's."""
    work = [error] if error is not None else []
    while work:
        error = work.pop(0)
        if isinstance(error, Diverged):
            return error
        if isinstance(error, BaseExceptionGroup):
            work.extend(error.exceptions)
    return None


@dataclass
class Staged:
    """What the stage made of one check, where the check ran: its divergences (None: it
    raised no finding, and its failure's text will say what it did), and, under --known, the
    entries matched and the divergences whose entry the experiment did not confirm."""

    found: list[Divergence] | None = None
    matched: set[str] = field(default_factory=set)
    revoked: list[Divergence] = field(default_factory=list)
    problem: str = ""  # the stage's own failure, outside any one divergence ("": none)


def stage_failed(problem: BaseException) -> str:
    """What a divergence says when the stage failed on it: the stage's error, and that the
    divergence is as found (not reduced, or not explained)."""
    said = " ".join(str(problem).split())[:300]
    return (f"the failure stage failed: {type(problem).__name__}"
            + (f": {said}" if said else "") + ": the divergence as found")


@dataclass
class Sorted:
    """A failed check's divergences sorted by --known: the new ones (the check fails with
    them), the entries that named the others, and whether the check is an expected failure
    (nothing new, something known)."""

    new: list[Divergence]
    matched: list[str] = field(default_factory=list)
    expected: bool = False


class FailureStage:
    """The failure stage of one run (this module's docstring): what it has seen, keyed by
    `same`, and its one budget.

    `cases_dir`: where divergences are saved as case files (None: nowhere, as fuzz's workers
    leave that to the driver); `spec` and `base`: the --impl as given and the folder it was
    given from, for the replay command a case file carries; `shrink`: whether findings are
    reduced; `known`: the entries of --known."""

    def __init__(self, *, spec: str, base: Path, cases_dir: Path | None, shrink: bool = True,
                 known: Known | None = None, budget: Budget | None = None):
        self.spec, self.base, self.cases_dir = spec, base, cases_dir
        self.shrink, self.known = shrink, known
        self.budget = budget if budget is not None else Budget()
        self.explainer = Explainer(self.budget)
        self.seen: dict[tuple[str, ...], str] = {}  # key -> the summary first seen with it
        # --known variant -> why the experiment did not confirm it ("": it did), per run
        self.confirmed_known: dict[str, str] = {}

    # --- where the check runs --------------------------------------------------------------

    def after_check(self, check: str, test_id: str, error: BaseException | None, tally: Tally,
                    impl) -> Staged:
        """The stage for one check, run as part of its call: its findings reduced, explained
        and saved, and --known's entries confirmed. Never raises for a bug of its own (each
        divergence says so; `divergence`), so that the check's own outcome stands and the run
        goes on."""
        staged = Staged()
        raised = diverged(error)
        # The finding `failed` starts from: the one raised, or the last one of a check the
        # implementation made stop (else the check's own text says what it did).
        finding = raised.finding if raised is not None else (
            tally.last if isinstance(error, Abandoned) else None)
        try:
            if finding is not None:
                staged.found = self.failed(check, test_id, error, tally, "", impl)
            if self.known is not None:
                staged.matched, staged.revoked = self.confirm_known(tally, check=check,
                                                                    test_id=test_id, impl=impl)
        except Exception as problem:  # noqa: BLE001 - the check's outcome stands, said
            if finding is not None and staged.found is None:
                staged.found = [self._as_found(check, test_id, finding, stage_failed(problem))]
            else:
                staged.problem = stage_failed(problem)
        return staged

    # --- 1-3: each finding reduced, described, explained, saved -------------------------

    def failed(self, check: str, test_id: str, error: BaseException | None, tally: Tally,
               text: str, impl) -> list[Divergence]:
        """A failed check's divergences: the one it raised (or, when the implementation made
        the check stop calling it, the last one it found; or its failure's text alone), then
        those its further looks found. `impl`: the implementation as the check called it."""
        found = diverged(error)
        if found is not None:
            first = self.divergence(check, test_id, found.finding, impl)
        elif isinstance(error, Abandoned) and tally.last is not None:
            first = self.divergence(check, test_id, tally.last, impl)
            first.description = "\n".join(filter(None, [first.description, f"({error})"]))
        else:
            first = divergence.undescribed(check, test_id, text)
        return [first] + [self.divergence(check, test_id, f, impl) for f in tally.passover.more]

    def divergence(self, check: str, test_id: str, finding: Finding, impl) -> Divergence:
        """One finding through the stage: reduced, described, explained and saved. A failure
        of the stage itself leaves the divergence as found (described, not reduced or not
        explained), saying so."""
        try:
            return self._through(check, test_id, finding, impl)
        except Exception as problem:  # noqa: BLE001 - the stage's bug must not cost the run
            d = self._as_found(check, test_id, finding, stage_failed(problem))
        if self.cases_dir is not None:
            try:
                divergence.save(d, self.cases_dir, self.spec, self.base)
            except OSError:
                pass  # said on the screen and in the reports all the same
        return d

    @staticmethod
    def _as_found(check: str, test_id: str, finding: Finding, note: str) -> Divergence:
        """`finding` described as found, with `note` (why the stage did no more). Never
        raises: a description that fails is the finding's summary, saying so too."""
        try:
            d = divergence.describe(check, test_id, finding)
        except Exception as problem:  # noqa: BLE001 - nor may its description's bug
            d = divergence.undescribed(check, test_id, f"{finding.summary}\n"
                                       f"{stage_failed(problem)}")
        d.description = "\n".join(filter(None, [d.description, f"({note})"]))
        return d

    def _through(self, check: str, test_id: str, finding: Finding, impl) -> Divergence:
        key = same(test_id, finding)
        before = self.seen.get(key)
        original = finding.case.text
        reduction, reduced = None, 0.0
        if self.shrink:
            if self.budget.left <= 0:
                reduction = Reduction(finding, reason=self.budget.spent_reason)
            elif before is not None:
                reduction = Reduction(finding, reason="a divergence of this signature was "
                                      f"reduced earlier in this run ({before})")
            else:
                started = time.monotonic()
                known = self.known
                reduction = reduce_finding(
                    finding, impl, deadline=self.budget.deadline(),
                    known=(lambda f: known.explains_finding(check, f)) if known else None)
                reduced = time.monotonic() - started
                self.budget.spent += reduced
                finding = reduction.finding
        d = divergence.describe(check, test_id, finding)
        if reduction is not None:
            d.reduction = divergence.visible(reduction.line())
            d.reduce_seconds = round(reduced, 3)
            if reduction.after < reduction.before:
                d.original = divergence.visible(original)
        if before is not None and self.budget.left > 0:
            # The first of the signature was explained: the budget only shrinks.
            Explainer.without(d, f"not explained again: a divergence of the same signature, "
                              f"found by {test_id} before ({before}), was explained in this "
                              "run")
        else:
            self.seen.setdefault(key, d.summary[:80])
            self.explainer.explain(d, finding, impl)  # says so where the budget is spent
        if self.cases_dir is not None:
            divergence.save(d, self.cases_dir, self.spec, self.base)
        return d

    # --- 4: known divergences -------------------------------------------------------------

    def sort_known(self, found: list[Divergence], tally: Tally, *, unsatisfiable: bool,
                   check: str = "", test_id: str = "", impl=None) -> Sorted:
        """docs/suite.md, "Known divergences": the check's divergences that a --known entry
        names are expected unless a new one is among them, which fails the check alone. A
        check whose every case showed a known divergence (Hypothesis's Unsatisfiable, once
        each was passed over) found nothing new. A variant entry names a finding only when
        the experiment confirms it there (docs/diagnosis.md, "Confirmation"), once per run
        and entry (`impl`: the implementation to run it on); the first finding of an entry
        that is not confirmed is a new divergence, saying so. (The plugin runs the two
        halves apart: `confirm_known` where the check runs, `sort_found` in its report.)"""
        matched, revoked = self.confirm_known(tally, check=check, test_id=test_id, impl=impl)
        return self.sort_found(found, matched, revoked, unsatisfiable=unsatisfiable)

    def confirm_known(self, tally: Tally, *, check: str = "", test_id: str = "",
                      impl=None) -> tuple[set[str], list[Divergence]]:
        """The --known entries the check's passed-over findings matched, less those the
        experiment did not confirm, and those findings as new divergences, saying why."""
        matched = set(tally.passover.matched)
        revoked = []
        for entry, finding in sorted(tally.passover.matched_findings.items()):
            try:
                why = self._unconfirmed(entry, finding, impl)
            except Exception as problem:  # noqa: BLE001 - unconfirmed: fail closed, say why
                why = f"the --known entry {entry} was not confirmed: {stage_failed(problem)}"
            if why:
                matched.discard(entry)
                d = self.divergence(check, test_id, finding, impl)
                d.description = "\n".join(filter(None, [d.description, why]))
                revoked.append(d)
        return matched, revoked

    def sort_found(self, found: list[Divergence], matched: set[str],
                   revoked: list[Divergence], *, unsatisfiable: bool) -> Sorted:
        """The check's divergences sorted by the --known entries (`confirm_known` gave
        `matched` and `revoked`): no experiment runs here."""
        matched = set(matched)
        if unsatisfiable and matched:
            found = []  # every case was a known divergence, passed over: nothing else to say
        new = list(revoked)
        for d in found:
            named = self.known.explains(d.signature, named_variants(d)) \
                if self.known is not None else None
            if named is None:
                new.append(d)
            else:
                matched.add(named)
        return Sorted(new, sorted(matched), expected=bool(matched) and not new)

    def _unconfirmed(self, entry: str, finding: Finding, impl) -> str:
        """Why the --known variant `entry` does not name `finding` ("" when it does): the
        experiment on other programs did not confirm it for this implementation. Asked once
        per run and entry."""
        if entry not in CATALOGUE or impl is None:
            return ""
        if entry not in self.confirmed_known:
            started = time.monotonic()
            try:
                result = experiment({entry: hypothesis_of(entry)}, finding, impl,
                                    deadline=self.budget.deadline(),
                                    library=self.explainer.library)
            except Abandoned as stopped:
                self.confirmed_known[entry] = f"not confirmed: {stopped}"
            else:
                evidence = result.evidence[entry]
                self.confirmed_known[entry] = "" if evidence.confirmed else (
                    f"the --known entry {entry} reproduces it, but the implementation did "
                    f"otherwise on {evidence.against}" if evidence.against else
                    f"the --known entry {entry} reproduces it, but no other program where "
                    f"it differs from the spec was found to confirm it "
                    f"({result.looked} looked at)")
            self.budget.spent += time.monotonic() - started
        return self.confirmed_known[entry]

    # --- 5: looking again -----------------------------------------------------------------

    def look_again(self, test_id: str, first: Finding, tally: Tally, left: Callable[[], int],
                   again: Callable[[int, int], None], *, looks: int = MORE_LOOKS) -> None:
        """After a generated check found `first`, run it `looks` times more, each with what
        is left of its cases (`left()`), passing over the divergences found so far (as
        Hypothesis's reject): each new one is kept on `tally.passover.more`. `again(look, cases)`
        runs the check once more; it raises what the check raises."""
        found = [first]
        tally.passover.subject = lambda finding: same(test_id, finding)
        for look in range(1, looks + 1):
            cases = left()
            if cases <= 0 or tally.abandon:
                return
            tally.passover.known = {same(test_id, f) for f in found}
            tally.last = None  # counting cases again: these are new ones
            try:
                again(look, cases)
            except Exception as error:  # noqa: BLE001 - anything else ends the looking
                other = diverged(error)
                if other is None:
                    return
                found.append(other.finding)
                tally.passover.more.append(other.finding)
            else:
                return
            finally:
                tally.passover.known = set()
                tally.last = first
