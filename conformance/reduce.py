"""The program reducer: after Hypothesis's shrink, the fewest statements that still show the
divergence. docs/diagnosis.md, "Reduction".

Hypothesis shrinks the choices a strategy made, so a program keeps whatever statements its
drawing needed; a case file is as its author wrote it. The reducer works on the program
itself, by delta debugging over statements and operands: it removes a statement (a loop or
a function whole), standing one of its operands in for its value wherever that was used, or
makes an operand the value its definition was made from. A candidate counts only when the
reference accepts it as it did the original (or rejects it by the same rule), the
implementation is asked for it as the check asked (run, or only built), the two are compared
as the check compared them (within the check's ulps, over what the implementation claims),
and the divergence has the original's signature. It stops when no single candidate counts:
then no statement can be removed (1-minimal), or when it has spent its runs or the time the
failure stage gave it (conformance/failure.py: one budget for reduction and explanation), and
says which.

Why not a library: picire and shrinkray reduce text by chunks (lines, bytes); removing a line
that defines a value leaves its uses dangling, so nearly every candidate they try is a program
the reference rejects, and neither stands an operand in for a removed value.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gradient_conformance.conformance.divergence import subject
from gradient_conformance.conformance.findings import Finding, ProgramCase, TapeCase
from gradient_conformance.conformance.outcome import compare
from gradient_conformance.conformance.readings import (
    Reading,
    rejected_as,
    rejected_line,
    stores_a_gradient,
)
from gradient_conformance.conformance.running import claimed, traps
from gradient_conformance.conformance.transports.loading import Abandoned
from gradient_conformance.reference.conditions import lifted
from gradient_conformance.reference.errors import GradientError
from gradient_conformance.reference.graph import SignatureError
from gradient_conformance.reference.syntax import Operand, Statement, format_program

RUNS = 300  # the implementation's runs one reduction may take
BLOCKS = {"range": "end", "def": "end"}


@dataclass
class Reduction:
    """What the reducer did to one finding: the finding it leaves (the original when it could
    not reduce), the statements before and after, the implementation's runs it took, whether
    the result is 1-minimal, and why not reduced, when it was not."""

    finding: Finding
    before: int = 0
    after: int = 0
    runs: int = 0
    minimal: bool = False
    reason: str = ""
    oracle_errors: list[str] = dataclasses.field(default_factory=list)
    out_of_time: bool = False  # stopped by its deadline rather than its runs

    def line(self) -> str:
        """The reduction in one line, as the terminal and the report show it."""
        if self.reason:
            return f"reduced: no ({self.reason})"
        how = ("no statement of it can be removed with the divergence kept" if self.minimal
               else "not minimal: the run's time for reducing and explaining ran out"
               if self.out_of_time else f"not minimal: the reducer spent its {RUNS} runs")
        bug = (f"; the reference failed on {len(self.oracle_errors)} smaller programs, a bug "
               f"of the suite's to report: {self.oracle_errors[0]}" if self.oracle_errors
               else "")
        return (f"reduced: from {self.before} statements to {self.after} ({how}; "
                f"{self.runs} runs of the implementation{bug})")


def reduce_finding(finding: Finding, impl, *, runs: int = RUNS,
                   deadline: float | None = None,
                   known: Callable[[Finding], str | None] | None = None) -> Reduction:
    """`finding`'s program reduced, keeping its divergence's signature (module docstring).
    `impl`: the implementation as the check called it; `deadline`: the time.monotonic() past
    which it asks no more; `known`: the --known entry that names a finding, if any. A finding
    no entry names is reduced only to programs no entry names: a reduction never turns a new
    divergence into a known one (docs/suite.md, "Known divergences")."""
    case = finding.case
    if isinstance(case, TapeCase):
        return Reduction(finding, reason="a tape: its entries are the case")
    statements = case.reading.statements or []
    if not statements:
        return Reduction(finding, reason="the program does not parse")
    if finding.got.status == "failure":
        return Reduction(finding, len(statements), len(statements),
                         reason="the implementation failed (a crash, a timeout or junk): each "
                         "smaller program would cost a restart; the location cuts the program "
                         "where one way of failing can be told (a signal, an exception of its "
                         "code)")
    if finding.comparison != "outcomes":
        return Reduction(finding, len(statements), len(statements),
                         reason=("its check compares with the true derivative"
                                 if finding.comparison == "truth" else
                                 "its check compares within the bound declared ulps "
                                 "propagate") + ", which the reducer does not repeat")
    search = _Search(finding, case, impl, runs, deadline,
                     known if known is not None and known(finding) is None else None)
    try:
        start = search.shows(statements)
        if start is None:
            return Reduction(finding, len(statements), len(statements), search.runs,
                             reason="the program printed canonically is not one the check "
                             f"would have reported so: {search.why}")
        best, minimal = search.reduce(statements, start)
    except Abandoned as stopped:
        return Reduction(finding, len(statements), len(statements), search.runs,
                         reason=f"the implementation stopped answering ({stopped})")
    after = best.case.size
    # Nothing removed: the program as the check found it, its text and lines as written.
    return Reduction(best if after < len(statements) else finding, len(statements), after,
                     search.runs, minimal, oracle_errors=search.oracle_errors,
                     out_of_time=search.out_of_time)


def _other_problems(reading: Reading, rule: str) -> frozenset[str]:
    """What else rejects the program once `rule` is lifted, and each rule found after it is
    lifted in turn (conditions.lifted): a gradient rule by its code, any other problem by
    its kind and message (not where it says it); and a graph that refuses the lifted
    gradient (with x-literal lifted, a literal beside a vector gets shares of the vector's
    shape), which breaks no rule of the spec but leaves no variant able to say what the
    gradient is."""
    assert reading.statements is not None
    _, problems = lifted(reading.statements, rule)
    return frozenset(
        "no graph holds its gradient with the rule lifted" if isinstance(p, SignatureError)
        else str(p.rule) if isinstance(p, GradientError) else f"{p.kind}: {p.message}"
        for p in problems)


class _Search:
    """One reduction: the original finding, what it is about, and the runs spent."""

    def __init__(self, finding: Finding, case: ProgramCase, impl, runs: int,
                 deadline: float | None = None,
                 known: Callable[[Finding], str | None] | None = None):
        self.finding, self.case, self.impl, self.budget, self.runs = \
            finding, case, impl, runs, 0
        self.deadline, self.known = deadline, known
        self.out_of_time = False
        # What the reference raised other than an IRError on a smaller program: its bug,
        # which a reduction must not turn into the run's end, and must not keep quiet.
        self.oracle_errors: list[str] = []
        self.why = ""  # why the last program asked about did not count
        self.target = subject(finding)
        got = finding.got
        # Built only, as a check of rejections asks: a rule missed, a program given no
        # buffers, or an acceptance without outputs.
        self.build_only = finding.rule is not None or not case.buffers or (
            got.status == "ok" and not got.buffers)
        # A missed rejection keeps what made it one (docs/diagnosis.md, "Reduction"): the
        # rule, with no other problem the program as found did not have (a smaller program
        # also broken otherwise asks a different question), and a stored gradient if the
        # implementation gave one (its values are what the variants' experiments compare).
        original = case.reading
        self.problems = _other_problems(original, finding.rule) \
            if finding.rule not in (None, "any") and original.statements is not None else None
        self.keeps_gradient = finding.rule not in (None, "any") and got.status == "ok" \
            and bool(got.buffers) and \
            stores_a_gradient(original.statements or [], rejected_line(original))
        if self.keeps_gradient:
            self.build_only = False  # the stored values are compared, so the program is run
        difference = finding.difference or compare(finding.want, got, ulps=finding.ulps)
        said = str(difference) if difference else ""
        self.context = finding.summary[:-len(said)] if said and \
            finding.summary.endswith(said) else ""

    def reduce(self, statements: list[Statement], best: Finding) -> tuple[Finding, bool]:
        """Passes over the statements, last first, until one changes nothing (1-minimal)
        or the runs are spent."""
        current = statements
        while True:
            changed = False
            k = len(current) - 1
            while k >= 0:
                for candidate in _candidates(current, k):
                    if self.runs >= self.budget:
                        return best, False
                    if self.deadline is not None and time.monotonic() > self.deadline:
                        self.out_of_time = True
                        return best, False
                    found = self.shows(candidate)
                    if found is not None:
                        current, best, changed = candidate, found, True
                        break
                k = min(k, len(current)) - 1
            if not changed:
                return best, True

    def shows(self, statements: list[Statement]) -> Finding | None:
        """The finding `statements` give, if it is the original's divergence; else None,
        with why in `why`."""
        finding = self.finding
        reading = Reading(format_program(statements), measure=False)
        if reading.error is not None or any(
                self.case.reading.slots.get(s) != kept for s, kept in reading.slots.items()):
            return self._not("it does not parse, or declares other slots")
        buffers = {s: a for s, a in self.case.buffers.items() if s in reading.slots}
        if not self.build_only and set(buffers) != set(reading.slots):
            return self._not("a slot the check gave no contents")
        try:
            want = reading.outcome(buffers, build_only=self.build_only)
        except Exception as problem:  # noqa: BLE001 - the oracle's bug, said, not the run's end
            self.oracle_errors.append(f"{type(problem).__name__}: {problem}")
            return self._not("the reference failed on it")
        if want.status != finding.want.status:
            return self._not(f"the reference's outcome is {want.status}, not "
                             f"{finding.want.status}")
        kind = rejected_as(reading) if finding.rule not in (None, "any") else finding.rule
        if kind != finding.rule:
            return self._not(f"the reference rejects it as {kind or 'nothing'}, not "
                             f"{finding.rule}")
        if self.problems is not None and finding.rule is not None and \
                (more := _other_problems(reading, finding.rule) - self.problems):
            return self._not(f"with {finding.rule} lifted, it is still rejected ("
                             f"{'; '.join(sorted(more))}), as the program found is not")
        if self.keeps_gradient and \
                not stores_a_gradient(reading.statements or [], rejected_line(reading)):
            return self._not("it stores no value made by the gradient")
        try:
            trapping = traps(self.impl, reading, buffers)
        except Exception as problem:  # noqa: BLE001 - as the outcome's: said, not the end
            self.oracle_errors.append(f"{type(problem).__name__}: {problem}")
            return self._not("the reference failed to measure it")
        if trapping:
            return self._not("it reaches a division the implementation declares traps")
        self.runs += 1
        got = self.impl.build_only(reading.source) if self.build_only else \
            self.impl.run_case(reading.source, buffers, reading.slots)
        if finding.rule is not None:
            want = finding.want  # a rejection is compared by kind, as the check did
        want, got, _ = claimed(self.impl, reading, want, got)
        difference = compare(want, got, ulps=finding.ulps)
        if difference is None:
            return self._not("the implementation agrees with the reference on it")
        found = Finding(f"{self.context}{difference}", want, got,
                        ProgramCase(reading, buffers), difference, finding.description,
                        rule=finding.rule, ulps=finding.ulps)
        if subject(found) != self.target:
            return self._not(f"its divergence is about {' / '.join(subject(found))}, not "
                             f"{' / '.join(self.target)}")
        entry = self.known(found) if self.known is not None else None
        if entry is not None:
            return self._not(f"the --known entry {entry} names it, and not the divergence as "
                             "found")
        return found

    def _not(self, why: str) -> Finding | None:
        self.why = why
        return None


def _candidates(statements: list[Statement], k: int) -> Iterator[list[Statement]]:
    """The programs one step smaller than `statements` at statement `k`: it removed (a loop
    or a function whole; a value's uses given one of its operands instead), then each of its
    operands made one its definition was made from."""
    s = statements[k]
    if s.op in BLOCKS:
        end = _block_end(statements, k)
        if end is not None:
            yield statements[:k] + statements[end + 1:]
    elif s.op not in ("end", "return"):
        rest = statements[:k] + statements[k + 1:]
        if s.target is None or not _used(rest, s.target):
            yield rest
        elif s.target is not None:
            for stand_in in _distinct(o for o in s.operands if o.kind != "func"):
                yield _substituted(rest, s.target, stand_in, k)
    defined = {d.target: d for d in statements[:k] if d.target}
    for position, operand in enumerate(s.operands):
        source = defined.get(operand.text) if operand.kind == "name" else None
        if source is None or source.op == "buffer":
            continue
        for stand_in in _distinct(o for o in source.operands if o.kind != "func"):
            operands = list(s.operands)
            operands[position] = stand_in
            yield [*statements[:k], dataclasses.replace(s, operands=tuple(operands)),
                   *statements[k + 1:]]


def _block_end(statements: list[Statement], k: int) -> int | None:
    depth = 0
    for j in range(k, len(statements)):
        if statements[j].op in BLOCKS:
            depth += 1
        elif statements[j].op == "end":
            depth -= 1
            if depth == 0:
                return j
    return None


def _used(statements: list[Statement], name: str) -> bool:
    return any(o.kind == "name" and o.text == name for s in statements for o in s.operands)


def _distinct(operands) -> list[Operand]:
    seen, out = set(), []
    for o in operands:
        if (o.kind, o.text) not in seen:
            seen.add((o.kind, o.text))
            out.append(o)
    return out


def _substituted(statements: list[Statement], name: str, stand_in: Operand,
                 start: int) -> list[Statement]:
    """`statements` with `name` read as `stand_in` from index `start` on."""
    return [*statements[:start], *(
        dataclasses.replace(s, operands=tuple(stand_in if o.kind == "name" and o.text == name
                                              else o for o in s.operands))
        for s in statements[start:])]
