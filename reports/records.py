"""A conformance run as plain data: the records the HTML and JSON reports are made from.
docs/reports.md, "Reports".

Nothing here runs an implementation or the reference: the suite (conformance/divergence.py
and totals.py) fills these records, and the renderers (reports/html.py, `to_json`) are pure
functions of them. The JSON form is versioned by `SCHEMA`; a reader refuses another major
version rather than guess.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields

SCHEMA = "gradient-conformance-report/1"
# What must not reach a page or a terminal raw: control characters (but newline and tab),
# lone surrogates, and the marks that reorder text (a right-to-left override can make a
# program read as another).
_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e"
                        r"\u2066-\u2069\ud800-\udfff]")


def visible(text: str) -> str:
    """`text` with every invisible or reordering character shown as its escape (`\\x1b`,
    `\\u202e`), so that what an implementation wrote is shown as it is, and can always be
    encoded as UTF-8."""
    return _INVISIBLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"),
                          str(text))


def quoted(text: str) -> str:
    """`text` as `visible` shows it, each line after its first marked `| `: what an
    implementation wrote, quoted in one of the suite's messages (a load that failed), so
    that none of its lines reads as the suite's ("301 passed") and no escape reaches the
    terminal."""
    first, *rest = visible(text).replace("\r", "\\r").split("\n")
    return "\n".join([first, *(f"  | {line}" for line in rest)])


def one_line(text: str, limit: int) -> str:
    """`text` as `visible` shows it, on one line (its line breaks shown as escapes) and cut
    to `limit` characters: what an implementation calls itself, never a line of its own in
    the suite's output."""
    shown = visible(text).replace("\r", "\\r").replace("\n", "\\n")
    return shown if len(shown) <= limit else f"{shown[:limit - 3]}..."


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun in the number it takes: "1 divergence", "2 divergences"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


@dataclass
class Element:
    """One element that differs: where, and both values in decimal and as bits."""

    slot: int
    index: int
    expected: str
    expected_bits: str
    actual: str
    actual_bits: str
    ulps: int | None = None  # None when the distance means nothing (a NaN, an i32, a bool)


@dataclass
class Divergence:
    """One failed check, with what a person needs to fix it. `signature` is (check, subject,
    kind): the subject is the rejection rule missed, or the ops the differing output depends
    on; the kind is what differs (bits, nan, signed-zero, infinity, a status, a failure).
    A failed check the suite could not describe structurally has only `summary`."""

    check: str
    test_id: str
    summary: str
    source: str = ""
    description: str = ""
    inputs: list[dict] = field(default_factory=list)  # {slot, dtype, shape, values, bits}
    expected_status: str = ""
    actual_status: str = ""
    expected_message: str = ""
    actual_message: str = ""  # the implementation's exception or stderr
    elements: list[Element] = field(default_factory=list)
    highlight: list[int] = field(default_factory=list)  # 1-based lines of `source`
    trace: str = ""
    expanded: str = ""
    case_file: str = ""
    replay: str = ""
    signature: tuple[str, str, str] = ("", "", "")
    # How the check compared: "outcomes" (bit for bit or within ulps) or "truth" (with the
    # true derivative, where no sign of a zero counts): what a re-check compares as.
    comparison: str = "outcomes"
    statements: int = 0
    also: list[str] = field(default_factory=list)  # signatures this one stands for
    # What the implementation did instead, in the spec's terms (conformance/diagnosis/diagnose.py):
    # variants, pairs, tried, pairs_tried, reason; and its line, as the terminal shows it.
    diagnosis: dict = field(default_factory=dict)
    diagnosis_line: str = ""
    # Where it departs (conformance/diagnosis/locate.py): line, says, reason, probes, runs;
    # and its line, as the terminal shows it.
    location: dict = field(default_factory=dict)
    location_line: str = ""
    ops: list[str] = field(default_factory=list)  # the IR's ops the differing output used
    # What the reducer did (conformance/reduce.py), as a line; and, when it removed
    # statements, the program as the check found it.
    reduction: str = ""
    original: str = ""
    reduce_seconds: float = 0.0  # what reducing it cost (its explanation's: in diagnosis, location)
    # The case file that replays it, as text, and the name it is saved under (its content's
    # hash): whoever keeps the store writes it (conformance/divergence.py, `save`).
    case_text: str = ""
    case_name: str = ""
    area: str = ""  # the area of the rubric of the test that found it (docs/grading.md)

    @property
    def key(self) -> str:
        return " / ".join(self.signature)


@dataclass
class Report:
    """A whole run. `checks`: check -> outcome -> count. `ops`: op -> check -> [cases run,
    divergences]. `ulps`: op -> {max, mean, samples, declared} for the forward ulp chart."""

    implementation: dict
    profile: str = ""
    started: str = ""
    seconds: float = 0.0
    checks: dict[str, dict[str, int]] = field(default_factory=dict)
    # area -> outcome -> count: each test in its area of the rubric (docs/grading.md, "The
    # rubric"), for grading
    areas: dict[str, dict[str, int]] = field(default_factory=dict)
    cases: dict[str, int] = field(default_factory=dict)  # check -> the cases it ran
    skips: dict[str, list[str]] = field(default_factory=dict)  # check -> its skip reasons
    # check -> how -> outputs compared (bit for bit, within the declared ulps, against the
    # true derivative, statuses); check -> why -> outputs left out. docs/suite.md, "What a
    # pass compared".
    compared: dict[str, dict[str, int]] = field(default_factory=dict)
    left_out: dict[str, dict[str, int]] = field(default_factory=dict)
    ops: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    # check -> condition -> cases that took it (reference/conditions.py;
    # docs/generators.md, "Conditions")
    conditions: dict[str, dict[str, int]] = field(default_factory=dict)
    # The model's size and how much of it the checks took, and the generated checks alone:
    # {"model": N, "reached": N, "unreached": [names], "says": {name: what it is},
    #  "generated": [checks], "generated_reached": N} (conformance/totals.py, coverage).
    coverage: dict = field(default_factory=dict)
    ulps: dict[str, dict] = field(default_factory=dict)
    divergences: list[Divergence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # python, numpy, hypothesis, ...
    command: str = ""  # the command line of the run
    isolation: str = ""  # where the implementation ran
    # A fuzz run's news since the previous run of the same implementation (SPEC.md,
    # "Fuzzing"): previous (when it started), new and fixed (signatures, as text).
    changes: dict = field(default_factory=dict)
    # Not empty when the run was cut short: what happened, and what did not run.
    interrupted: str = ""
    # What held the implementation in (docs/isolation.md, "Isolation"), and what it had to end.
    confinement: str = ""
    schema: str = SCHEMA


def divergence_to_dict(d: Divergence) -> dict:
    return asdict(d)


DEPTH = 64  # arrays and objects nested deeper than this are not JSON the suite reads


def loads(text: str | bytes, **options):
    """JSON read back from a file or a process (json.loads's `options`): ValueError (never
    RecursionError, which JSON nested some thousand deep raises, here or in whatever walks
    it later) when it is not JSON the suite can hold: nested deeper than DEPTH."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None
    if _depth(value) > DEPTH:
        raise ValueError(f"JSON nested more than {DEPTH} deep")
    return value


def _depth(value) -> int:
    """How deep arrays and objects nest in `value`, counted without recursion."""
    deepest, frontier = 0, [(value, 1)]
    while frontier:
        item, depth = frontier.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth <= DEPTH:  # past it the answer is known
                frontier += [(v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                                      else item)]
    return deepest


def case_file_name(check: str, text: str, suffix: str) -> str:
    """The name a divergence's case file is saved under: its check and its content's hash.
    Rebuilt by every reader from the content, never taken from a record, so that no record
    can name a path."""
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in check)[:60]
    return f"{slug}-{hashlib.sha256(text.encode('utf-8', 'replace')).hexdigest()[:12]}{suffix}"


def _typed(cls, data, what: str) -> dict:
    """The fields of `cls` in `data`, each of its field's type, or ValueError naming it."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} is {type(data).__name__}, not an object")
    values: dict = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value, kind = data[f.name], _KINDS.get(str(f.type).split("[")[0].split(" |")[0])
        if value is None and "None" in str(f.type):
            values[f.name] = None
        elif kind is not None and not (isinstance(value, kind) and not (
                kind is int and isinstance(value, bool))):
            raise ValueError(f"{what}'s {f.name!r} is {type(value).__name__}, not "
                             f"{str(f.type).split('[')[0]}")
        else:
            values[f.name] = value
    return values


_KINDS: dict[str, type | tuple[type, ...]] = {
    "str": str, "int": int, "float": (int, float), "list": list, "dict": dict,
    "tuple": (list, tuple), "bool": bool}


def divergence_from_dict(data) -> Divergence:
    """A divergence record read back (a report, a fuzz store, another process's record),
    checked field by field: ValueError saying what is wrong. Its case file's name is rebuilt
    from its content."""
    values = _typed(Divergence, data, "a divergence record")
    try:
        values["elements"] = [Element(**_typed(Element, e, "a differing element"))
                              for e in values.get("elements", [])]
    except TypeError:
        raise ValueError("a differing element without all of slot, index, expected, "
                         "expected_bits, actual, actual_bits") from None
    signature = values.get("signature", ["", "", ""])
    if len(signature) != 3 or not all(isinstance(part, str) for part in signature):
        raise ValueError("a divergence record's signature is not three strings")
    values["signature"] = tuple(signature)
    for name in ("highlight", "also", "ops", "inputs"):
        kind = dict if name == "inputs" else int if name == "highlight" else str
        if not all(isinstance(v, kind) for v in values.get(name, [])):
            raise ValueError(f"a divergence record's {name!r} holds something not "
                             f"{kind.__name__}")
    text = values.get("case_text", "")
    values["case_name"] = case_file_name(
        values.get("check", ""), text,
        ".json" if str(data.get("case_name", "")).endswith(".json") else ".ir") if text else ""
    try:
        return Divergence(**values)
    except TypeError:
        raise ValueError("a divergence record without all of check, test_id and summary") \
            from None


# An exception the implementation raised, as the suite describes it (transports/calling.py,
# `describe`): `Type: message (file:line)`, after "rejected by a crash: " for one from build,
# "it raised " for one that is no Exception, "it ran out of recursion depth: " for a
# RecursionError (issue 53: a RecursionError was counted among "no crash").
_RAISED = re.compile(r"(?:rejected by a crash: |it raised |it ran out of recursion depth: )?"
                     r"([A-Za-z_][\w.]*): (.*) \(([^()\n]+:\d+)\)", re.S)


def raised_at(message: str) -> tuple[str, str, str] | None:
    """(exception type, the place in the implementation's code, its message) when a failure's
    `message` is an exception the implementation raised, as the transports word it; else
    None."""
    found = _RAISED.fullmatch((message or "").strip())
    if found is None:
        return None
    kind, said, place = found.groups()
    return kind, place, said


def crash_cause(d: Divergence) -> tuple[str, str, str] | None:
    """(exception type, the place in the implementation's code it was raised, its message)
    when `d` is a crash (a failure, or a run-time error, whose message is an exception the
    implementation raised); else None. Divergences of one type at one place are one cause
    (docs/diagnosis.md, "Crashes")."""
    if d.actual_status not in ("failure", "run-error"):
        return None
    return raised_at(d.actual_message)


def crash_causes(divergences: list[Divergence]) -> list[tuple[tuple[str, str], str, list[int]]]:
    """((type, place), the first message, the divergences by position from 1) of each crash
    cause, the one with the most divergences first."""
    causes: dict[tuple[str, str], tuple[str, list[int]]] = {}
    for k, d in enumerate(divergences, start=1):
        cause = crash_cause(d)
        if cause is not None:
            causes.setdefault(cause[:2], (cause[2], []))[1].append(k)
    return sorted(((key, message, ks) for key, (message, ks) in causes.items()),
                  key=lambda c: (-len(c[2]), c[0]))


def diagnoses(divergences: list[Divergence]) -> list[dict]:
    """The report's summary of diagnoses: each variant named, what it does, the divergences
    (by position, from 1) it explains alone, and on how many divergences of each of their
    signatures it held; then the divergences no variant explains."""
    by_name: dict[str, dict] = {}
    per_signature: dict[tuple, list[int]] = {}
    for k, d in enumerate(divergences, start=1):
        per_signature.setdefault(tuple(d.signature), []).append(k)
        for v in d.diagnosis.get("variants", []):
            entry = by_name.setdefault(v["name"], {**v, "divergences": []})
            entry["divergences"].append(k)
    for entry in by_name.values():
        signatures = {tuple(divergences[k - 1].signature) for k in entry["divergences"]}
        total = sum(len(per_signature[s]) for s in signatures)
        entry["held"] = f"{len(entry['divergences'])} of {total}"
    crashes = crash_causes(divergences)
    crashed = {k for _, _, ks in crashes for k in ks}
    unexplained = [k for k, d in enumerate(divergences, start=1)
                   if d.diagnosis and not d.diagnosis.get("variants") and
                   not d.diagnosis.get("pairs") and k not in crashed]
    summary = sorted(by_name.values(), key=lambda e: (-len(e["divergences"]), e["name"]))
    causes = [{"name": "", "says": f"{kind} at {place} ({message})", "section": "",
               "divergences": ks, "held": ""} for (kind, place), message, ks in crashes]
    return causes + summary + ([{"name": "", "says": "no known variant reproduces these",
                                 "section": "", "divergences": unexplained, "held": ""}]
                               if unexplained else [])


def to_json(report: Report) -> str:
    data = asdict(report)
    data["diagnoses"] = diagnoses(report.divergences)
    return json.dumps(data, indent=1, sort_keys=True)


def from_json(text: str) -> Report:
    """A JSON report read back, or ValueError saying what is wrong with it."""
    data = loads(text)
    if not isinstance(data, dict):
        raise ValueError("a report is a JSON object")
    schema = str(data.get("schema", ""))
    if schema != SCHEMA:
        raise ValueError(f"a report of schema {schema!r}; this reader knows {SCHEMA!r}")
    values = _typed(Report, data, "the report")
    for name in ("checks", "areas"):  # counts that grading adds up
        if not all(isinstance(outcomes, dict) and all(
                isinstance(k, str) and type(n) is int and n >= 0 for k, n in outcomes.items())
                for outcomes in values.get(name, {}).values()):
            raise ValueError(f"the report's {name!r} are not outcome -> count")
    values["divergences"] = [divergence_from_dict(d) for d in values.get("divergences", [])]
    if "implementation" not in values:
        raise ValueError("a report without its implementation")
    return Report(**values)


VALUE_KINDS = frozenset({"bits", "nan", "signed-zero", "infinity", "value"})


def _symptom(d: Divergence) -> str:
    """What kind of thing went wrong: a wrong value (of whatever kind), or a status."""
    return "value" if d.signature[2] in VALUE_KINDS else d.signature[2]


def smallest_per_signature(divergences: list[Divergence]) -> list[Divergence]:
    """One divergence per signature, the smallest program (then the shortest text) of each,
    in the order the signatures were first seen."""
    best: dict[tuple, Divergence] = {}
    for d in divergences:
        held = best.get(d.signature)
        if held is None or (d.statements, len(d.source)) < (held.statements, len(held.source)):
            best[d.signature] = d
    return list(best.values())


def representatives(divergences: list[Divergence]) -> list[Divergence]:
    """The divergences a person needs to read: the smallest of each signature, and of those,
    only the ones no simpler divergence explains. A divergence of the same check and kind
    whose ops include all the ops of another is presumed the same fault, reached through
    more ops (recip's rule, reached also through an expand, or through sqrt's second
    derivative), and is listed in that one's `also` instead of shown. Wrong values merge
    whatever their kind (a wrong rule gives wrong bits here, NaN there, a zero's sign
    elsewhere); a wrong status (a rejection missed, a failure) merges only with its like. A
    missed rejection's subject is the rule's code alone, so it merges only with the same
    rule."""
    shown: list[Divergence] = []
    for d in sorted(smallest_per_signature(divergences),
                    key=lambda d: (len(d.ops), d.statements, len(d.source))):
        for rep in shown:
            if rep.check == d.check and _symptom(rep) == _symptom(d) and rep.ops and \
                    set(rep.ops) <= set(d.ops):
                rep.also = sorted({*rep.also, d.key})
                break
        else:
            shown.append(d)
    return sorted(shown, key=lambda d: (d.check, d.signature))
