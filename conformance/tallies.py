"""What one check measures while it runs: `Tally` (the cases per op, the conditions, the
figures, the ledger of what it compared and how, and the last divergence it found), and
`require_compared`, which fails a check that compared nothing. Whoever runs a check gives
it a new one (the plugin's `tally` fixture), so nothing is kept between checks; the failure
stage keeps its own state on the tally's `passover` (conformance/failure.py). docs/suite.md,
"What a pass compared"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gradient_conformance.conformance.findings import Diverged, Finding
from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.reference.ops import FEATURES


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


# Values computed from an op's results whose error is declared in ulps (running.beyond_the_op).
PROPAGATED = "within the bound the declared ulps propagate"


STATUS = "statuses"  # a rejection, an acceptance or a run-time error, by kind


LINES = "line numbers in messages"  # a text error's line, as ir.md asks of every message


HOW = (BITS, ULPS, PROPAGATED, TRUTH, STATUS, LINES)


# What an `#: error-mentions` line says beyond a line number: the reference's own words.
WORDING = ("the wording an `#: error-mentions` line asks beyond its line number: the "
           "reference's own, not asked of an implementation (ir.md asks for the line and a "
           "message a person can act on)")


UNCHECKED = "messages: not compared (CAPABILITIES['messages'] is False)"


@dataclass
class Passover:
    """The failure stage's state on one check's tally (conformance/failure.py): what the check
    passes over as it runs, and what the stage found. A second look: the subjects of the
    divergences found already, how a finding's subject is read, and the other divergences
    found. Known divergences (conformance/known.py): what tells the entry that names a
    finding (given by the plugin), the entries found, passed over as the second look's, and
    the first finding each matched, on which a variant entry is confirmed once per run
    (`FailureStage.confirm_known`)."""

    known: set = field(default_factory=set)
    subject: Callable[[Finding], object] = lambda finding: None
    more: list[Finding] = field(default_factory=list)
    expected: Callable[[Finding], str | None] | None = None
    matched: set[str] = field(default_factory=set)
    matched_findings: dict[str, Finding] = field(default_factory=dict)


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
        self.passover = Passover()  # the failure stage's, on this check
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
        stage = self.passover
        entry = stage.expected(finding) if stage.expected is not None else None
        if entry is not None:
            stage.matched.add(entry)
            stage.matched_findings.setdefault(entry, finding)
        if entry is not None or (stage.known and stage.subject(finding) in stage.known):
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
                **({"known": sorted(self.passover.matched)} if self.passover.matched else {})}


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
