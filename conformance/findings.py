"""What a check found: the case (`ProgramCase`, `TapeCase`: a `Case`), the `Finding` (both
outcomes, their difference) and `Diverged`, the failure that carries it. Hypothesis shrinks on
it as on any failure; the failure stage (conformance/failure.py) describes the last one.
docs/suite.md, "The conformance suite"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gradient_conformance.conformance.outcome import Difference, Outcome
from gradient_conformance.conformance.readings import Reading


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
    # claims), which the reducer can repeat; "truth" (near_the_truth) and "bound" (within the
    # bound declared ulps propagate, conformance/propagated.py), which it does not.
    comparison: str = "outcomes"


class Diverged(AssertionError):
    """A check's failure, carrying its finding. An AssertionError, so that pytest and
    Hypothesis treat it as any failed assertion (and shrink on it)."""

    def __init__(self, finding: Finding):
        self.finding = finding
        super().__init__("\n".join(filter(None, [finding.summary, finding.description,
                                                 finding.case.shown()])))
