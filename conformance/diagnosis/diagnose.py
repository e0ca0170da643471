"""Diagnosis: what an implementation did instead of the spec, when a variant of the spec
(variants.py) did exactly the same. docs/diagnosis.md, "Diagnosis".

For a divergent case, the reference is run again with each variant that could matter (the
case uses what the variant changes: variants.applies). A variant is named only if it
reproduces *every* output of the implementation under the check's own comparison (bit for
bit, or within the ulps the check allowed; any NaN matching any NaN), or, for a divergence of
status, the same status; an acceptance the spec rejects, only if the variant and the
implementation then also give the same values on the same inputs (VERIFY_INPUTS of them),
since a variant that accepts the program may still compute something else. Several may; all
are named. When none does, pairs of the variants that each reproduce some of the differing
elements are tried together (at most PAIR_CANDIDATES of them), each pair only in an order in
which both are in effect (variants.composable). Otherwise the answer is that no known variant
reproduces the bits: never a guess, never the closest.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from gradient_conformance.conformance.diagnosis.variants import (
    CATALOGUE,
    Variant,
    applies,
    composable,
    implicated_ops,
)
from gradient_conformance.conformance.findings import Finding, TapeCase
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.readings import (
    Reading,
    gradients_shown,
    stores_a_gradient,
)
from gradient_conformance.conformance.running import traps
from gradient_conformance.reference.interp import NUMPY_DTYPES
from gradient_conformance.reference.tape import backprop_bits

PAIR_CANDIDATES = 12  # variants tried in pairs, at most: 66 pairs
# The inputs on which an accepted program is run by a variant and by the implementation, to
# tell whether the variant that accepts it is what the implementation did: every f32 input
# element one value, every i32 another.
VERIFY_INPUTS = ((3.0, 3), (-0.75, -2))


@dataclass
class Diagnosis:
    """`variants`: each reproduces everything alone, and the experiment confirmed it;
    `pairs`: each pair does together (tried only when no variant alone does), confirmed the
    same way; `tried`, `pairs_tried`: how many were run. `candidates`: the hypotheses that
    reproduced the found case (a pair written "a+b"), confirmed or not; `evidence`: what the
    experiment found for each (confirm.Evidence.to_dict); `experiment`: its figures (looked,
    ran, seconds, stopped). docs/diagnosis.md, "Confirmation"."""

    variants: list[str] = field(default_factory=list)
    pairs: list[list[str]] = field(default_factory=list)
    tried: int = 0
    pairs_tried: int = 0
    reason: str = ""  # why nothing was tried (a failure is no variant)
    seconds: float = 0.0  # what finding it cost
    verified_on: int = 0  # inputs an acceptance's variants were also run on, to compare values
    ulps: int = 0  # the ulps the check allowed, and the comparison allowed too
    candidates: list[str] = field(default_factory=list)
    evidence: list[dict] = field(default_factory=list)
    experiment: dict = field(default_factory=dict)
    # The variants reading a decision of SPEC.md otherwise that change the spec's outcome
    # here: the expectation rests on those decisions (docs/diagnosis.md, "Decisions").
    decisions: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.variants or self.pairs)

    def line(self) -> str:
        """The diagnosis in one line, as the terminal shows it, and which decisions of this
        project (not the course's text) the expectation rests on."""
        said = self._line()
        for name in self.decisions:
            v = CATALOGUE[name]
            said += (f". This expectation rests on a decision of this project, not on the "
                     f"course's text (SPEC.md, \"{v.section}\": {v.decision.replace('**', '')})"
                     f"; read otherwise, the course text gives another outcome here "
                     f"[{name}]")
        return said

    def _line(self) -> str:
        if self.reason:
            return f"diagnosis: none ({self.reason})"
        how = f"within the {self.ulps} ulps the check allows" if self.ulps else "exactly"
        if self.variants:
            named = "; or ".join(_says(CATALOGUE[n]) for n in self.variants)
            sections = ", ".join(f'"{s}"' for s in sorted({CATALOGUE[n].section
                                                             for n in self.variants}))
            also = (f", and the same values on {self.verified_on} inputs"
                    if self.verified_on else "")
            apart = ("; the programs run did not tell them apart"
                     if len(self.variants) > 1 else "")
            # A variant that reads a decision of SPEC.md otherwise is no bug: the course
            # text, read the other way where it is silent.
            opener = ("the course text read otherwise where SPEC.md decides, one that"
                      if all(CATALOGUE[n].decision for n in self.variants) else
                      "the spec, but one that")
            return (f"diagnosis: {opener} {named}, gives {how} these "
                    f"results{also} (SPEC.md, {sections}); {self._support(self.variants)}"
                    f"{apart}")
        if self.pairs:
            named = "; or ".join(" and ".join(_says(CATALOGUE[n]) for n in pair)
                                 for pair in self.pairs)
            return (f"diagnosis: no variant alone, but the spec that {named} gives {how} "
                    f"these; {self._support(['+'.join(p) for p in self.pairs])}")
        if self.candidates:
            return ("diagnosis: no known variant confirmed: " +
                    "; ".join(self._unconfirmed(n) for n in self.candidates))
        return (f"diagnosis: no known variant reproduces these results ({self.tried} tried"
                f"{f', and {self.pairs_tried} pairs' if self.pairs_tried else ''})")

    def _evidence(self, name: str) -> dict:
        return next((e for e in self.evidence if e.get("name") == name), {})

    def _support(self, names: list[str]) -> str:
        """How the named hypotheses were confirmed: the separating programs each held on."""
        said = []
        for name in names:
            support = self._evidence(name).get("support", [])
            where = Counter(support)
            sources = ", ".join(f"{label} ({n})" if n > 1 else label
                                for label, n in where.items())
            said.append(f"{'[' + name + '] ' if len(names) > 1 else ''}confirmed on "
                        f"{len(support)} other program{'s' if len(support) != 1 else ''} "
                        f"where it differs from the spec ({sources})")
        return "; ".join(said)

    def _unconfirmed(self, name: str) -> str:
        evidence = self._evidence(name)
        shown = " and ".join(_says(CATALOGUE[n]) for n in name.split("+"))
        if evidence.get("against"):
            return (f"the spec that {shown} gives these results here, but the implementation "
                    f"did otherwise on {evidence['against']}")
        if evidence.get("name") is None:
            why = "no implementation was at hand to run other programs on"
        else:
            stopped = self.experiment.get("stopped") or "the search ended"
            why = (f"no other program where it differs from the spec was found "
                   f"({self.experiment.get('looked', 0)} looked at; {stopped})")
        return f"the spec that {shown} gives these results here, but {why}"

    def to_dict(self) -> dict:
        """As a divergence record keeps it: each variant with what it does and where the
        spec says otherwise, so that a report needs no catalogue to show it."""
        def named(name: str) -> dict:
            v = CATALOGUE[name]
            return {"name": v.name, "says": v.says, "section": v.section,
                    "ops": sorted(implicated_ops(v))}
        return {**asdict(self), "variants": [named(n) for n in self.variants],
                "pairs": [[named(n) for n in pair] for pair in self.pairs]}

    @classmethod
    def from_dict(cls, kept: dict, variants: list[str]) -> Diagnosis:
        """The diagnosis a record keeps (`to_dict`), with its variants in the order given:
        to say it again after the run's verdict put one first (explain.prefer)."""
        def listed(key: str, kind: type) -> list:
            value = kept.get(key)
            return [v for v in value if isinstance(v, kind)] if isinstance(value, list) else []
        ulps, verified = kept.get("ulps", 0), kept.get("verified_on", 0)
        experiment = kept.get("experiment")
        return cls(variants=variants, ulps=ulps if type(ulps) is int else 0,
                   verified_on=verified if type(verified) is int else 0,
                   candidates=listed("candidates", str), evidence=listed("evidence", dict),
                   experiment=experiment if isinstance(experiment, dict) else {},
                   decisions=[n for n in listed("decisions", str) if n in CATALOGUE])


def _says(variant: Variant) -> str:
    return f"{variant.says} [{variant.name}]"


def decisions_of(reading: Reading, buffers, want: Outcome, *, build_only: bool) -> list[str]:
    """The variants reading a decision of SPEC.md otherwise (Variant.decision) whose outcome
    on this program differs from the spec's `want`: the decisions the expectation rests on."""
    found = []
    for v in CATALOGUE.values():
        if not v.decision or v.tape or not applies(v, reading.reaches):
            continue
        theirs = run_variant(reading, v.semantics(), buffers, build_only=build_only)
        if theirs is not None and compare(want, theirs) is not None:
            found.append(v.name)
    return found


def run_variant(reading: Reading, semantics, buffers, *, build_only: bool = False) \
        -> Outcome | None:
    """The reference's outcome under `semantics`, built from the reading's parse, or None
    if the variant cannot express the case at all (its change met something it was not
    written for). `build_only`: the implementation was only asked to build (a check of
    rejections), so the variant is too."""
    try:
        return reading.outcome(buffers, semantics, build_only=build_only)
    except Exception:  # noqa: BLE001 - a variant that does not apply here: no diagnosis
        return None


def reproduces(variant: Outcome | None, got: Outcome, ulps: int = 0) -> bool:
    """Whether the variant's outcome is the implementation's, as the check compared the
    spec's with it (within `ulps`), over the same slots. An acceptance the implementation
    was only asked to build has no outputs, and neither has the variant's, built only. A
    rejection is the variant's only where it has the same reason, as far as the message
    shows one: the implementation's gives the line the variant rejects at (ir.md asks every
    error for its line), so a rejection for another reason elsewhere is not the variant's."""
    return variant is not None and set(variant.buffers) == set(got.buffers) and \
        compare(variant, got, ulps=ulps) is None and same_line(variant, got)


_LINE = re.compile(r"line (\d+)\b")


def same_line(theirs: Outcome, got: Outcome) -> bool:
    """For two rejections: whether `got`'s message names the line `theirs` names first (the
    reference's messages begin with it); True for anything else, or when `theirs` names
    none."""
    if theirs.status != "rejected" or got.status != "rejected":
        return True
    found = _LINE.search(theirs.message)
    return found is None or re.search(rf"\bline {found.group(1)}\b", got.message) is not None


def _explained(variant: Outcome | None, got: Outcome, wrong: frozenset, ulps: int) -> int:
    """How many of the elements where the spec differs from the implementation (`wrong`)
    the variant gets right."""
    if variant is None or variant.status != "ok" or set(variant.buffers) != set(got.buffers):
        return 0
    theirs = compare(variant, got, ulps=ulps)
    if theirs is not None and theirs.kind == "missing":
        return 0
    return len(wrong - (theirs.differing if theirs is not None else frozenset()))


def _timed(diagnose, *args) -> Diagnosis:
    started = time.monotonic()
    diagnosis = diagnose(*args)
    diagnosis.seconds = time.monotonic() - started
    return diagnosis


def diagnose_case(reading: Reading, buffers, want: Outcome, got: Outcome, *, ulps: int = 0,
                  impl=None) -> Diagnosis:
    """Which variants give `got` on this program, where the spec gives `want`, compared
    within the `ulps` the check allowed. `impl`: the implementation, asked to run a program
    it accepted where the spec rejects it (without it, no acceptance is named)."""
    return _timed(_diagnose_case, reading, buffers, want, got, ulps, impl)


def _diagnose_case(reading: Reading, buffers, want: Outcome, got: Outcome, ulps: int,
                   impl) -> Diagnosis:
    if got.status == "failure":
        return Diagnosis(reason="the implementation misbehaved: no variant of the spec does")
    candidates = [v for v in CATALOGUE.values() if not v.tape and applies(v, reading.reaches)]
    build_only = got.status == "ok" and not got.buffers  # a check of rejections: built only
    outcomes = {v.name: run_variant(reading, v.semantics(), buffers, build_only=build_only)
                for v in candidates}
    found = [name for name, outcome in outcomes.items() if reproduces(outcome, got, ulps)]
    diagnosis = Diagnosis(variants=found, tried=len(candidates), ulps=ulps)
    if found and want.status == "rejected" and got.status == "ok":
        diagnosis.variants, diagnosis.verified_on, diagnosis.reason = _same_values(
            reading, found, impl, ulps)
        return diagnosis
    spec = compare(want, got, ulps=ulps)
    if found or got.status != "ok" or want.status != "ok" or spec is None:
        return diagnosis
    explained = {n: _explained(outcome, got, spec.differing, ulps)
                 for n, outcome in outcomes.items()}
    helpful = sorted((n for n in explained if explained[n]),
                     key=lambda n: -explained[n])[:PAIR_CANDIDATES]
    for a, b in itertools.combinations(helpful, 2):
        # Applied one after the other, only in an order in which both are in effect: a
        # variant that computes an op otherwise replaces what the other did to it, unless
        # it wraps it (a flush).
        orders = [(f, t) for f, t in ((a, b), (b, a)) if composable(CATALOGUE[f], CATALOGUE[t])]
        if orders:
            diagnosis.pairs_tried += 1
        for first, then in orders:
            both = CATALOGUE[then].change(CATALOGUE[first].semantics())
            if reproduces(run_variant(reading, both, buffers, build_only=build_only), got,
                          ulps):
                diagnosis.pairs.append([first, then])  # in the order that reproduced it
                break
    return diagnosis


def verification_inputs(slots) -> list[dict]:
    """The initial contents an accepted program is run on to compare values (VERIFY_INPUTS),
    every slot it declares filled."""
    return [{slot: np.full(shape, f if dtype == "f32" else i, NUMPY_DTYPES[dtype])
             for slot, (dtype, shape) in slots.items()} for f, i in VERIFY_INPUTS]


def _same_values(reading: Reading, accepting: list[str], impl, ulps: int) \
        -> tuple[list[str], int, str]:
    """Of the variants that accept a program the spec rejects, as the implementation did,
    those that also give the implementation's values on every one of the verification
    inputs: (their names, inputs tried, why none could be checked)."""
    if impl is None:
        return [], 0, ("variants accept it as the implementation does, but the "
                       "implementation was not asked to run it, so none is named")
    # The values are those of the rejected gradient: stored where the program stores nothing
    # computed from it (readings.gradients_shown); a program where it cannot be stored shows
    # none, and no values are compared (verified on 0 inputs).
    shown = gradients_shown(reading, {})
    if shown is None or not stores_a_gradient(shown[0].statements or ()):
        return list(accepting), 0, ""
    reading = shown[0]
    # Not the inputs it would trap at, where it declares that integer division traps.
    inputs = [b for b in verification_inputs(reading.slots) if not traps(impl, reading, b)]
    kept = list(accepting)
    for buffers in inputs:
        theirs = impl.run_case(reading.source, buffers, reading.slots)
        kept = [n for n in kept if reproduces(
            run_variant(reading, CATALOGUE[n].semantics(), buffers), theirs, ulps)]
        if not kept:
            break
    return kept, len(inputs), ""


def diagnose_tape(tape, want: Outcome, got: Outcome) -> Diagnosis:
    """Which tape variants give `got`'s derivatives, where the spec gives `want`'s."""
    return _timed(_diagnose_tape, tape, want, got)


def _diagnose_tape(tape, want: Outcome, got: Outcome) -> Diagnosis:
    if got.status == "failure":
        return Diagnosis(reason="the implementation misbehaved: no variant of the spec does")
    if got.status != "ok" or want.status != "ok":
        return Diagnosis(reason="a tape rejected or accepted otherwise: the catalogue has no "
                         "variant of the tape's rejections")
    candidates = [v for v in CATALOGUE.values() if v.tape]
    found = [v.name for v in candidates if _tape_reproduces(tape, v, got)]
    return Diagnosis(variants=found, tried=len(candidates))


def _tape_reproduces(tape, variant: Variant, got: Outcome) -> bool:
    """Whether a tape variant's derivatives are exactly `got`'s."""
    try:
        bits = backprop_bits(tape, variant.semantics())
    except Exception:  # noqa: BLE001 - the variant does not apply to this tape
        return False
    return compare(Outcome("ok", derivatives=bits), got) is None


def reproduced_by(finding: Finding, names) -> str | None:
    """The first of the variants `names` that gives exactly what the implementation gave in
    `finding` (a case or a tape), compared as its check compared (its ulps); or None. How a
    known divergence is told by what it is (conformance/known.py)."""
    for name in names:
        variant = CATALOGUE[name]
        case = finding.case
        if isinstance(case, TapeCase):
            if variant.tape and finding.got.status == "ok" and \
                    _tape_reproduces(case.tape, variant, finding.got):
                return name
            continue
        reading = case.reading
        if variant.tape or finding.got.status == "failure" or \
                not applies(variant, reading.reaches):
            continue
        build_only = finding.got.status == "ok" and not finding.got.buffers
        outcome = run_variant(reading, variant.semantics(), case.buffers,
                              build_only=build_only)
        if reproduces(outcome, finding.got, finding.ulps):
            return name
    return None
