"""`gradient-conformance recheck REPORT.json --impl=X`: every claim a run's JSON report makes
about an implementation, re-checked outside the run that made it. docs/commands.md,
"Recheck".

The run's words are hypotheses until programs confirm them (docs/diagnosis.md); this command
is the audit of those words, by other means than the run's own:

- **reproduced**: each divergence's program, on the inputs the report gives (their bits), is
  run again on the reference and on the implementation: each gives the status the report
  says, and every element the report lists has the bits it says (any NaN matching any NaN);
- **named**: each variant (or pair) the diagnosis names gives the implementation's outcome on
  the reported program, compared as the check compared (its ulps; no sign of a zero where it
  compared with the true derivative), and again on the program with every gradient stored
  (a rejected one's too, built with the rule lifted), where the implementation must give the
  variant's value wherever the variant departs from the spec (confirm.bears_out: a second
  fault elsewhere is no evidence against it);
- **decided**: an expectation said to rest on a decision of SPEC.md is re-run on the
  decision's control program (the found one rewritten so that the decision cannot matter),
  where the implementation must no longer depart as it did (confirm.uncontrolled);
- **located**: a value located at a statement (`kind` "value") is probed again, the
  statement and each of its operands stored: the statement's value departs from the spec's,
  its operands' do not; a rejection located at a line is the line the reference rejects at;
  a refusal (a crash, the implementation's rejection or run-time error) located at a line
  is refused by the program cut after that line's unit, the same way, and not by the one
  cut before it. The locator's other kinds (shares, folds, hash
  consing, loops) are counted as not re-probed, by kind.

A divergence that does not reproduce is asked again: in the same process, first thing in a
new one, and there after each of a few of the report's other programs. Only an answer the same
every time is evidence against the report; one that changes with what ran before, and never
as the report says, is left out, as is a failure of the run's (a timeout, a memory limit, a
crash) that does not recur.

What is not re-checked is said, with why; a report with nothing to re-check, or of another
implementation than X (another name or version), is a usage error. Exit status: 0 when every
claim re-checked holds, 1 when one does not, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from gradient_conformance.conformance.commands.suite import confinement_of, load_implementation
from gradient_conformance.conformance.diagnosis.confirm import (
    bears_out,
    compared,
    hypothesis_of,
    uncontrolled,
)
from gradient_conformance.conformance.diagnosis.locate import failed_as, top_level_units
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.options import add_containment
from gradient_conformance.conformance.outcome import Outcome, bits_text, compare, f32_agree
from gradient_conformance.conformance.readings import (
    Reading,
    appended,
    gradients_shown,
    rejection,
    stores_of,
)
from gradient_conformance.reference import cases
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.program import Define

REPORT_BYTES = 256 * 1024 * 1024  # a JSON report read back, at most


@dataclass
class Rechecked:
    """What the re-check found: for each kind of claim (reproduced, named, located), how
    many held and, one line each, those that did not; what was not re-checked, by why."""

    held: Counter = field(default_factory=Counter)
    false: dict[str, list[str]] = field(default_factory=dict)
    left_out: Counter = field(default_factory=Counter)
    # Of the names that held, re-run with every gradient stored: whether they gave every
    # value the implementation gave (True), or differed only where they keep the spec's.
    stored: Counter = field(default_factory=Counter)
    # Divergences that reproduced only first thing in a new process of the implementation,
    # and only there after another of the report's programs.
    first_thing: int = 0
    after_another: int = 0

    def claim(self, kind: str, holds: bool, said: str) -> None:
        if holds:
            self.held[kind] += 1
        else:
            self.false.setdefault(kind, []).append(said)

    @property
    def checked(self) -> int:
        return sum(self.held.values()) + sum(len(v) for v in self.false.values())

    def lines(self) -> list[str]:
        said = []
        for kind in ("reproduced", "named", "decided", "located"):
            wrong = self.false.get(kind, [])
            said.append(f"{kind}: {self.held[kind] + len(wrong)} claims re-checked, "
                        f"{len(wrong)} false")
            said += [f"  false: {line}" for line in wrong]
            if kind == "reproduced" and self.first_thing:
                said.append(f"  of those that hold, {self.first_thing} only first thing in a "
                            "new process: after the programs before it, the implementation "
                            "answered otherwise (its answer depends on what it ran before)")
            if kind == "reproduced" and self.after_another:
                said.append(f"  of those that hold, {self.after_another} only in a new process "
                            "after another of the report's programs (its answer depends on "
                            "what it ran before)")
            if kind == "named" and self.stored:
                said.append(f"  of those that hold, re-run with every gradient stored: "
                            f"{self.stored[True]} give every value the implementation gives, "
                            f"{self.stored[False]} differ from it only where they keep the "
                            "spec's value (another cause)")
        said += [f"not re-checked, {n}: {why}" for why, n in sorted(self.left_out.items())]
        return said


def _another_implementation(report: dict, loaded: str) -> str:
    """Why the report's claims cannot be re-checked against the implementation `loaded` (its
    name and version, as a report states them), or "": a report is re-checked only against the
    implementation it is of. A real system's answers may differ between its versions and
    configurations (tinygrad's between devices, which its adapter's version names), and a claim
    re-checked against another would be found false for what is no fault of the run's."""
    said = report.get("implementation")
    if not isinstance(said, dict) or not isinstance(said.get("name"), str):
        return "the report does not say which implementation it is of (its \"implementation\")"
    stated = f"{said['name']} {said.get('version', '')}".strip()
    if stated != loaded:
        return (f"the report is of {stated!r}, and --impl loads {loaded!r}: a report's claims "
                "are re-checked against the implementation it is of")
    return ""


def recheck(impl, report: dict, fresh=None) -> Rechecked:
    """Re-check every divergence of `report` (a run's JSON report, read back: data to
    validate) against `impl`, the implementation the run was of; `fresh()`, when given,
    starts another process of it, which a claim that does not reproduce is asked again in:
    an answer that depends on what the process ran before is no evidence against it."""
    found = Rechecked()
    divergences = report.get("divergences")
    if not isinstance(divergences, list):
        raise ValueError("the report has no list of divergences")
    for k, d in enumerate(divergences):
        if not isinstance(d, dict):
            raise ValueError(f"divergence {k} of the report is no object")
    programs = [_program_of(d) for d in divergences]
    for k, d in enumerate(divergences):
        # The report's other programs, nearest first: histories to ask a program after.
        others = sorted((j for j in range(len(programs)) if j != k and programs[j]),
                        key=lambda j: abs(j - k))[:HISTORIES]
        _recheck_one(impl, d, found, f"divergence {k + 1} ({d.get('test_id', '?')})", fresh,
                     [programs[j] for j in others])
    return found


HISTORIES = 8  # of the report's other programs, the most a claim is asked again after


def _program_of(d: dict) -> tuple[Reading, dict, bool] | None:
    """A divergence's program, its inputs and whether it is only built; None for one the
    re-check does not run (a tape's, none, inputs that do not read back)."""
    source = d.get("source")
    if str(d.get("case_name", "")).endswith(".json") or not isinstance(source, str) or \
            not source:
        return None
    try:
        buffers = _buffers(d.get("inputs", []))
    except (ValueError, KeyError, TypeError):
        return None
    return Reading(source, measure=False), buffers, _build_only(d)


def _build_only(d: dict) -> bool:
    """Whether the divergence is of the program built (a rejection), not run."""
    expected, actual = d.get("expected_status"), d.get("actual_status")
    return expected == "rejected" or (actual == "ok" and not d.get("elements") and
                                      expected != "ok")


def _recheck_one(impl, d: dict, found: Rechecked, name: str, fresh=None,
                 history: list | tuple = ()) -> None:
    if str(d.get("case_name", "")).endswith(".json"):
        found.left_out["a tape's divergence (the recheck re-runs programs)"] += 1
        return
    source = d.get("source")
    if not isinstance(source, str) or not source:
        found.left_out["a divergence without a program (a run's crash, a usage error)"] += 1
        return
    reading = Reading(source, measure=False)
    try:
        buffers = _buffers(d.get("inputs", []))
    except (ValueError, KeyError, TypeError) as problem:
        found.claim("reproduced", False, f"{name}: its inputs do not read back ({problem})")
        return
    build_only = _build_only(d)
    want = reading.outcome(buffers, build_only=build_only)
    got = _asked(impl, reading, buffers, build_only)
    wrong = _reproduced(d, want, got)
    if wrong:
        settled = _asked_again(impl, fresh, d, reading, buffers, build_only, want, got, found,
                               history)
        if settled is None:
            return
        wrong, got = settled
    found.claim("reproduced", not wrong, f"{name}: {wrong}")
    diagnosis = _mapping(d.get("diagnosis"))
    named = [[str(v.get("name"))] for v in diagnosis.get("variants", []) if isinstance(v, dict)]
    named += [[str(v.get("name")) for v in pair if isinstance(v, dict)]
              for pair in diagnosis.get("pairs", []) if isinstance(pair, list)]
    ulps = diagnosis.get("ulps", 0) if type(diagnosis.get("ulps", 0)) is int else 0
    zero_signs = d.get("comparison", "outcomes") != "truth"
    controls: dict[str, str] = {}

    def control(variant: str) -> str:  # its control program, run once for the divergence
        if variant not in controls:
            controls[variant] = uncontrolled(variant, reading, buffers, want, got, impl, ulps)
        return controls[variant]
    for names in named:
        if not names or not all(n in CATALOGUE for n in names):
            found.claim("named", False, f"{name}: names {names}, which the catalogue lacks")
            continue
        said, whole = _named(impl, reading, buffers, want, got, names, ulps, zero_signs,
                             build_only)
        if not said and len(names) == 1:  # a decision's variant: its control program too
            said = control(names[0])
        found.claim("named", not said, f"{name}: [{'+'.join(names)}] {said}")
        if not said and whole is not None:
            found.stored[whole] += 1
    for decision in diagnosis.get("decisions", []):
        if not isinstance(decision, str) or decision not in CATALOGUE or \
                CATALOGUE[decision].control is None:
            found.left_out["a decision without a control program (Variant.control)"] += 1
            continue
        said = control(decision)
        found.claim("decided", not said, f"{name}: rests on [{decision}]: {said}")
    location = _mapping(d.get("location"))
    if location.get("line"):
        _located(impl, reading, buffers, location, found, name, ulps, zero_signs)


def _mapping(value) -> dict:
    """A record's object, or an empty one where it holds anything else (data to validate)."""
    return value if isinstance(value, dict) else {}


def _asked_again(impl, fresh, d: dict, reading: Reading, buffers, build_only: bool,
                 want: Outcome, got: Outcome, found: Rechecked,
                 history: list | tuple = ()) -> tuple[str, Outcome] | None:
    """A claim that did not reproduce, asked again: None (left out) when the implementation
    answers otherwise each time, or otherwise first thing in a new process (`fresh`), or
    otherwise there after one of `history` (the report's other programs), without reproducing
    the report in either; else (what still differs, the answer kept). Only an answer the same
    after every history tried is evidence against the report: a run's answer came after
    thousands of programs, which no re-check replays."""
    again = _asked(impl, reading, buffers, build_only)
    if again.status != got.status or compare(got, again) is not None:
        found.left_out["a divergence whose program the implementation answers otherwise "
                       "each time it is asked (not deterministic, or a timeout): its "
                       "claims cannot be re-checked"] += 1
        return None
    if fresh is None:
        return _reproduced(d, want, got), got
    other = fresh()  # the same answer twice here: and first thing in a new process?
    try:
        first = _asked(other, reading, buffers, build_only)
        alike = first.status == got.status and compare(got, first) is None
        after = _after_another(other, reading, buffers, build_only, got, history) \
            if alike else None
    finally:
        other.close()
    if alike and after is None and d.get("actual_status") == "failure" and \
            got.status != "failure":
        found.left_out["a failure of the run's (a timeout, a memory limit, a crash) that the "
                       "implementation does not meet again: these depend on the machine's "
                       "load and limits and on what ran before, so its claims cannot be "
                       "re-checked"] += 1
        return None
    if alike and after is None:
        return _reproduced(d, want, got), got
    if alike and after is not None and not _reproduced(d, want, after):
        found.after_another += 1
        return "", after  # after another of the report's programs, as the report says
    if alike or _reproduced(d, want, first):
        found.left_out["a divergence whose program the implementation answers otherwise in a "
                       "new process than after the programs before it (its answer depends on "
                       "what it ran before: memory it did not write, a cache): its claims "
                       "cannot be re-checked"] += 1
        return None
    found.first_thing += 1
    return "", first  # first thing in a new process, as the report says


def _after_another(impl, reading: Reading, buffers, build_only: bool, got: Outcome,
                   history) -> Outcome | None:
    """The first answer to the program, asked after each of `history`'s programs in turn,
    that is not `got`; None when every one is."""
    for program, inputs, only_built in history:
        _asked(impl, program, inputs, only_built)
        answer = _asked(impl, reading, buffers, build_only)
        if answer.status != got.status or compare(got, answer) is not None:
            return answer
    return None


def _buffers(inputs) -> dict[int, np.ndarray]:
    """The buffers a record's `inputs` give, from their bits."""
    buffers = {}
    for given in inputs:
        dtype, shape = given["dtype"], tuple(int(n) for n in given["shape"])
        array = cases.values_array([cases.value(t, dtype) for t in given["bits"]], dtype)
        buffers[int(given["slot"])] = array.reshape(shape)
    return buffers


def _reproduced(d: dict, want: Outcome, got: Outcome) -> str:
    """'' when the reference and the implementation give what the record says; else what
    differs."""
    if want.status != d.get("expected_status"):
        return f"the reference gives {want.status}, the report says {d.get('expected_status')}"
    if got.status != d.get("actual_status"):
        return (f"the implementation gives {got.status}, the report says "
                f"{d.get('actual_status')}")
    for e in d.get("elements", []):
        slot, index = e.get("slot"), e.get("index")
        for side, outcome in (("expected", want), ("actual", got)):
            array = outcome.buffers.get(slot) if outcome.status == "ok" else None
            if array is None or not isinstance(index, int) or not 0 <= index < array.size:
                return f"slot {slot}[{index}] is not in the {side} outcome"
            value = array.ravel()[index]
            said = str(e.get(f"{side}_bits", ""))
            if array.dtype == np.float32:
                bits = int(value.view(np.uint32))
                if not said.startswith("0x") or not f32_agree(int(said, 16), bits):
                    return f"slot {slot}[{index}]: {side} {bits:#010x}, the report says {said}"
            elif bits_text(value.item()) != said:
                return f"slot {slot}[{index}]: {side} {bits_text(value.item())}, the report " \
                       f"says {said}"
    return ""


def _named(impl, reading: Reading, buffers, want: Outcome, got: Outcome, names: list[str],
           ulps: int, zero_signs: bool, build_only: bool) -> tuple[str, bool | None]:
    """('' when the hypothesis `names` holds on the reported program and on it with every
    gradient stored, else where it does not; whether, stored, it gives every value the
    implementation gives (None: no program with its gradients stored was run))."""
    semantics = hypothesis_of(*names).semantics
    try:
        theirs = reading.outcome(buffers, semantics, build_only=build_only)
    except Exception as problem:  # noqa: BLE001 - a variant that cannot run it holds nothing
        return f"cannot run the reported program ({type(problem).__name__})", None
    # The diagnosis says it "gives exactly these results": every one, as the check compared.
    if (differs := compared(theirs, got, ulps, zero_signs)) is not None:
        return f"does not give the implementation's outcome on the reported program " \
               f"({differs})", None
    stored = _every_gradient_stored(reading, buffers)
    if stored is None:
        return "", None
    again, inputs = stored
    try:
        spec = again.outcome(inputs)
        theirs = again.outcome(inputs, semantics)
    except Exception:  # noqa: BLE001 - it holds where it can be run, and was above
        return "", None
    mine = impl.run_case(again.source, inputs, again.slots)
    if bears_out(spec, theirs, mine, ulps, zero_signs=zero_signs) is False:
        return (f"with every gradient stored, the implementation does otherwise "
                f"({compared(theirs, mine, ulps, zero_signs)})"), False
    return "", compared(theirs, mine, ulps, zero_signs) is None


def _every_gradient_stored(reading: Reading, buffers) -> tuple[Reading, dict] | None:
    """The program with each f32 gradient of its top level stored into a buffer of its own
    (a rejected one built with its rule lifted, as readings.gradients_shown makes it), and its
    inputs with those buffers added; None where it has none to add."""
    statements = reading.statements
    if statements is None:
        return None
    if rejection(reading) is not None:  # run whole: a variant that accepts it computes values
        shown = gradients_shown(reading, buffers)
        return (shown[0], shown[1]) if shown is not None else None
    try:
        program = reading.program()
    except IRError:
        return None
    gradients = [s for s in program.statements if isinstance(s, Define) and
                 s.expansion is not None and s.node.dtype == "f32"]
    if not gradients:
        return None
    declared, kept, added = stores_of(reading, [(d.name, d.node) for d in gradients], "%all")
    again = appended(reading, declared + kept)
    return (again, {**buffers, **added}) \
        if again.statements is not None and again.error is None else None


def _located(impl, reading: Reading, buffers, location: dict, found: Rechecked, name: str,
             ulps: int, zero_signs: bool) -> None:
    kind, line = location.get("kind", ""), location.get("line")
    statement = next((s for s in reading.statements or () if s.line == line), None)
    if statement is None:
        found.claim("located", False, f"{name}: line {line} is no statement of the program")
        return
    if location.get("op") and location.get("op") != statement.op:
        found.claim("located", False, f"{name}: line {line} is a `{statement.op}`, the "
                    f"location says `{location.get('op')}`")
        return
    if kind == "rejection":
        problem = rejection(reading)
        at = getattr(problem, "line", None)
        found.claim("located", at == line,
                    f"{name}: the reference rejects at line {at}, the location says {line}")
        return
    if kind in ("crash", "rejected", "run-error"):
        said = _refusal_probe(impl, reading, buffers, statement.line,
                              build_only=kind == "rejected")
        found.claim("located", not said, f"{name}: line {line}: {said}")
        return
    if kind != "value":
        found.left_out[f"a location of kind {kind!r} (values, rejections and refusals are "
                       "re-probed)"] += 1
        return
    said = _value_probe(impl, reading, buffers, statement, ulps, zero_signs)
    found.claim("located", not said, f"{name}: line {line}: {said}")


def _refusal_probe(impl, reading: Reading, buffers, line: int, *, build_only: bool) -> str:
    """'' when the implementation refuses the program cut after the unit of `line` (a
    top-level statement, or a whole range or def) as it refused the whole, and not the
    program cut before it (the location says the refusal starts there); else what the probe
    found. `build_only`: the refusal is a rejection, asked of a build."""
    units = top_level_units(reading.statements or ())
    at = next((k for k, (first, last) in enumerate(units) if first <= line <= last), None)
    if at is None:
        return "no top-level unit holds that line"
    whole = _asked(impl, reading, buffers, build_only)

    def refused(k: int) -> bool | None:
        prefix = Reading("\n".join(reading.source.splitlines()[:units[k][1]]) + "\n",
                         measure=False)
        mine = {s: a for s, a in buffers.items() if s in prefix.slots}
        if prefix.outcome(mine).status != "ok":
            return None
        got = _asked(impl, prefix, mine, build_only)
        return got.status == whole.status and failed_as(got.message) == \
            failed_as(whole.message)
    if whole.status == "ok" or refused(at) is not True:
        return "the program cut after it is not refused as the whole is"
    if at > 0 and refused(at - 1) is not False:
        return "the program cut before it is refused too, or is not one the spec accepts"
    return ""


def _asked(impl, reading: Reading, buffers, build_only: bool) -> Outcome:
    """What the implementation does with the program: built only, or run on `buffers`."""
    return impl.build_only(reading.source) if build_only else \
        impl.run_case(reading.source, buffers, reading.slots)


def _value_probe(impl, reading: Reading, buffers, statement, ulps: int,
                 zero_signs: bool) -> str:
    """'' when the statement's value departs from the spec's and its operands' do not, each
    stored into a buffer of its own; else what the probe found."""
    try:
        program = reading.program()
    except IRError as problem:
        return f"the program does not build ({problem})"
    defined = {s.name: s.node for s in program.statements if isinstance(s, Define)}
    names = [statement.target] + [o.text for o in statement.operands if o.kind == "name"]
    shown = [(n, defined[n]) for n in dict.fromkeys(names) if n in defined and
             defined[n].dtype in ("f32", "i32", "bool")]
    if not shown or shown[0][0] != statement.target:
        return "its value cannot be stored at the top level (the probe re-runs none)"
    declared, kept, added = stores_of(reading, shown, "%probe")
    again, inputs = appended(reading, declared + kept), {**buffers, **added}
    slot = min(added)
    want = again.outcome(inputs)
    got = impl.run_case(again.source, inputs, again.slots)
    if want.status != "ok" or got.status != "ok":
        return f"the probe ran: spec {want.status}, implementation {got.status}"

    def departs(k: int) -> bool:
        return compared(Outcome("ok", {slot + k: want.buffers[slot + k]}),
                        Outcome("ok", {slot + k: got.buffers.get(slot + k, np.zeros(0))}),
                        ulps, zero_signs) is not None
    if not departs(0):
        return "its value agrees with the spec's"
    early = [n for k, (n, _) in enumerate(shown) if k and departs(k)]
    return f"its operands {', '.join(early)} already depart" if early else ""


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "recheck", help="re-check every claim of a run's JSON report against the "
        "implementation, outside the run")
    parser.add_argument("report", metavar="REPORT.json")
    parser.add_argument("--impl", required=True)
    parser.add_argument("--case-timeout", type=float, default=20.0)
    add_containment(parser.add_argument, "--")


def run(args: argparse.Namespace) -> int:
    try:
        text = cases.read_file(args.report, REPORT_BYTES)
        report = json.loads(text)
    except (OSError, ValueError) as problem:
        print(f"error: {args.report}: {problem}", file=sys.stderr)
        return 2
    if not isinstance(report, dict):
        print(f"error: {args.report}: not a report (a JSON object)", file=sys.stderr)
        return 2
    impl = load_implementation(args.impl, args.case_timeout, confinement_of(args))
    other = _another_implementation(report, impl.label)
    if other:
        impl.close()
        print(f"error: {args.report}: {other}", file=sys.stderr)
        return 2
    try:
        found = recheck(impl, report, fresh=lambda: load_implementation(
            args.impl, args.case_timeout, confinement_of(args)))
    except ValueError as problem:
        print(f"error: {args.report}: {problem}", file=sys.stderr)
        return 2
    finally:
        impl.close()
    for line in found.lines():
        print(line)
    if not found.checked:
        print(f"error: {args.report}: no claim to re-check", file=sys.stderr)
        return 2
    false = sum(len(v) for v in found.false.values())
    print(f"{found.checked} claims re-checked against {args.impl}: "
          f"{'every one holds' if not false else f'{false} false'}")
    return 1 if false else 0
