"""What a run saw, as report records: the divergences, the cases per op, the forward ulps.
SPEC.md, "Reports".

A check that finds a difference calls `RECORDER.diverged(...)`. Hypothesis runs the shrunk
counterexample last, so the pending record when the test fails is the shrunk one; the pytest
plugin (or the fuzzer) then calls `finish`, which turns it into a `Divergence` and saves it as
a case file that replays it. The recorder is per process and per run: `reset` empties it.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shlex
import sys
from collections import Counter, defaultdict

import numpy as np

from gradient_conformance import reference
from gradient_conformance.conformance.implementation import FEATURES, Outcome
from gradient_conformance.generators.buffers import POISON
from gradient_conformance.reference import cases, exact
from gradient_conformance.reference.build import Define, Loop
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.printer import format_expanded, format_trace
from gradient_conformance.reference.rules import rule_key
from gradient_conformance.reference.syntax import parse
from gradient_conformance.reference.tape import format_tape_case
from gradient_conformance.reports.records import Divergence, Element, visible

# Ops that move values about without computing: they are in every program's cone, and say
# nothing about which rule is wrong.
STRUCTURE = frozenset({"buffer", "load", "store", "def", "end", "return", "range", "call"})
MAX_ELEMENTS = 16  # differing elements listed per divergence; the count of the rest is given


class Recorder:
    """What the current check saw. One per process: `begin` starts each check afresh (a
    pytest test, or a batch of the fuzzer), and whoever runs the check collects, when it
    ends, the cases run per op, the forward errors, the figures and the divergence."""

    def __init__(self):
        self.begin("", "")

    def begin(self, check: str, test_id: str) -> None:
        self.check, self.test_id = check, test_id
        self.pending = self.last = None
        self.cases = 0
        self.ops: Counter[str] = Counter()  # op -> generated cases of this check that used it
        self.ulps: dict[str, dict] = {}  # op -> the forward error figures of the ulp chart
        self.figures: dict[str, dict] = {}  # name -> figures to merge across checks

    def case(self, features) -> None:
        """A case ran under the current check; it used `features` (only the IR's own count:
        an error case's unknown op is none)."""
        self.cases += 1
        self.ops.update(set(features) & FEATURES)

    def measure(self, name: str, **values) -> None:
        """Add to the figures `name`: a value whose key starts with max_ is a maximum, any
        other a count (merge_figures says how figures of several checks combine)."""
        self.figures[name] = merge_figures(self.figures.get(name, {}), values)

    def diverged(self, source: str, buffers, want: Outcome, got: Outcome, *,
                 summary: str, description: str = "", rule: str | None = None) -> None:
        self.pending = ("program", source, buffers, want, got, summary, description, rule)

    def diverged_tape(self, tape, want: Outcome, got: Outcome, *, summary: str,
                      description: str = "") -> None:
        self.pending = ("tape", tape, want, got, summary, description)

    def finish(self, failed: bool, text: str, *, impl_spec: str,
               cases_dir: pathlib.Path | None = None,
               base: pathlib.Path | None = None) -> Divergence | None:
        """The divergence of a check that just ended (None if it passed): the pending record
        if there is one, else the failure's text alone. Its case file goes into `cases_dir`
        now, or later through `save` (None); `base` is where the replay command is run."""
        pending, self.pending = self.pending, None
        self.last = None
        if not failed:
            return None
        if pending is None:
            return Divergence(check=self.check, test_id=self.test_id,
                              summary=visible(_first(text)), actual_message=visible(text),
                              signature=(self.check, "", "failed"))
        if pending[0] == "tape":
            _, tape, want, got, summary, description = pending
            d = describe_tape(self.check, self.test_id, tape, want, got, summary=summary,
                              description=description)
            self.last = ("tape", tape, want)
        else:
            _, source, buffers, want, got, summary, description, rule = pending
            d = describe(self.check, self.test_id, source, buffers, want, got,
                         summary=summary, description=description, rule=rule)
            self.last = ("program", source, buffers, want)
        if cases_dir is not None:
            self.save(d, cases_dir, impl_spec, base)
        return d

    def save(self, d: Divergence, folder: pathlib.Path, impl_spec: str,
             base: pathlib.Path | None = None) -> None:
        """Save the divergence `finish` just returned as a case file, and say how to replay
        it. A divergence without a program (a check that failed otherwise) has none."""
        if self.last is None:
            return
        if self.last[0] == "tape":
            path = save_tape_case(d, self.last[1], self.last[2], folder)
        else:
            path = save_case(d, *self.last[1:], folder)
        d.case_file = str(_shown(path, base))
        d.replay = replay_command(path, impl_spec, base)


# Figures a check measures -> the check module that says them in words (its `figures`).
FIGURE_WRITERS = {"derivative": "gradient_conformance.conformance.checks.test_derivative"}


def describe_figures(figures: dict[str, dict]) -> list[str]:
    """The lines of the run's figures, each said by the check that measured it."""
    import importlib
    return [importlib.import_module(FIGURE_WRITERS[name]).figures(values)
            for name, values in sorted(figures.items()) if name in FIGURE_WRITERS]


def merge_figures(a: dict, b: dict) -> dict:
    """Two checks' figures as one: the larger of each max_ value, the sum of the others."""
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
        elif key.startswith("max_"):
            out[key] = max(out[key], value)
        else:
            out[key] += value
    return out


RECORDER = Recorder()


def describe(check: str, test_id: str, source: str, buffers, want: Outcome, got: Outcome, *,
             summary: str, description: str = "", rule: str | None = None) -> Divergence:
    """A divergence record: the elements that differ, the lines to highlight, the reference's
    trace and expanded program, and the signature the fuzzer deduplicates on."""
    elements, kind = differing_elements(want, got)
    slot = elements[0].slot if elements else None
    try:
        statements = parse(source)
    except IRError:  # a syntax-error case: there is no program to draw
        statements = []
    cone = _cone(statements, slot) if statements else []
    if rule is not None:
        subject = rule
        highlight = [s.line for s in statements if s.op == "gradient"]
    else:
        highlight = sorted({s.line for s in cone if s.op == "store" or s in _roots(cone)})
    trace = expanded = ""
    applied: set[str] = set()
    if any(s.op == "gradient" for s in statements) and want.status == "ok":
        program = reference.compile_program(source)
        trace, expanded = format_trace(program), format_expanded(program)
        applied = _rules_applied(program, {s.line for s in cone if s.op == "gradient"})
    if rule is None:
        subject = "+".join(sorted(({s.op for s in cone} | applied) - STRUCTURE))
    from gradient_conformance.conformance.diagnosis import diagnose_case
    diagnosis = diagnose_case(source, buffers, want, got) if statements else None
    return Divergence(
        check=check, test_id=test_id, summary=visible(summary), source=visible(source),
        description=visible(description), inputs=_inputs(source, buffers) if statements else [],
        expected_status=want.status, actual_status=got.status,
        expected_message=want.message, actual_message=got.message,
        elements=elements, highlight=highlight, trace=trace, expanded=expanded,
        signature=(check, subject, kind), statements=len(statements),
        diagnosis=diagnosis.to_dict() if diagnosis else {},
        diagnosis_line=diagnosis.line() if diagnosis else "")


def describe_tape(check: str, test_id: str, tape, want: Outcome, got: Outcome, *,
                  summary: str, description: str = "") -> Divergence:
    """A tape's divergence: the tape one entry a line (the differing entry highlighted), and
    each differing derivative as an element of slot 0. Its subject is the kinds of entry on
    the tape, and the first differing entry's kind."""
    lines = [f"{k}: {entry!r}" for k, entry in enumerate(tape)] if isinstance(tape, list) \
        else [repr(tape)]
    elements, kind, first = [], f"{want.status}->{got.status}", None
    if got.status == "failure":
        kind = "failure"
    elif want.status == got.status == "ok":
        elements, kinds = _f32_elements(0, want.derivatives, got.derivatives)
        first = elements[0].index if elements else None
        kind = kinds[0] if kinds else "none"
    kinds = sorted({str(e[0]) for e in tape if isinstance(e, list | tuple) and e}) \
        if isinstance(tape, list) else []
    subject = (want.message if want.status == "rejected" else
               "tape:" + "+".join(kinds))
    from gradient_conformance.conformance.diagnosis import diagnose_tape
    diagnosis = diagnose_tape(tape, want, got)
    return Divergence(check=check, test_id=test_id, summary=visible(summary),
                      source=visible("\n".join(lines)), description=visible(description),
                      expected_status=want.status, actual_status=got.status,
                      expected_message=want.message, actual_message=got.message,
                      elements=elements[:MAX_ELEMENTS],
                      highlight=[first + 1] if first is not None else [],
                      signature=(check, subject, kind), statements=len(lines),
                      diagnosis=diagnosis.to_dict(), diagnosis_line=diagnosis.line())


SHOWN_VALUES = 16  # input values per slot in the terminal


def terminal_text(d: Divergence) -> str:
    """A divergence as the terminal shows a failed check: what differs, the program (the
    case's, not the suite's source) with the lines that made the differing slot marked, the
    inputs in decimal and hex, what the implementation said, and how to replay it."""
    out = [d.summary] + ([d.description] if d.description and d.description != d.summary
                         else [])
    if d.source:
        marked = set(d.highlight)
        out.append("--- the program" + (" (lines marked > store the first differing slot)"
                                        if marked else "") + " ---")
        out += [f"{'>' if k in marked else ' '}{k:4}  {line}"
                for k, line in enumerate(d.source.splitlines(), start=1)]
    if d.inputs:
        out.append("--- inputs ---")
        for slot in d.inputs:
            pairs = [value if value == bits else f"{value} ({bits})"
                     for value, bits in zip(slot["values"], slot["bits"], strict=False)]
            more = len(pairs) - SHOWN_VALUES
            out.append(f"slot {slot['slot']} {slot['dtype']}{slot['shape']}: "
                       + "  ".join(pairs[:SHOWN_VALUES]) + (f"  ... {more} more" if more > 0
                                                            else ""))
    if d.elements:
        out.append("--- differing elements ---")
        out += [f"slot {e.slot}[{e.index}]: expected {e.expected} ({e.expected_bits}), got "
                f"{e.actual} ({e.actual_bits})" + ("" if e.ulps is None else
                                                   f", {e.ulps} ulps apart")
                for e in d.elements]
    if d.actual_message and d.actual_message not in d.summary:
        out += ["--- the implementation said ---", d.actual_message]
    if d.diagnosis_line:
        out.append(d.diagnosis_line)
    if d.case_file:
        out.append(f"case file: {d.case_file}")
    if d.replay:
        out.append(f"replay:    {d.replay}")
    return "\n".join(out)


def differing_elements(want: Outcome, got: Outcome) -> tuple[list[Element], str]:
    if got.status == "failure":
        return [], "failure"
    if want.status != got.status:
        return [], f"{want.status}->{got.status}"
    found, kinds = [], []
    for slot, w in sorted(want.buffers.items()):
        g = got.buffers.get(slot)
        if g is None:
            continue
        if w.dtype == np.float32:
            more, more_kinds = _f32_elements(slot, w.view(np.uint32).ravel().tolist(),
                                             g.view(np.uint32).ravel().tolist())
            found += more
            kinds += more_kinds
        else:
            for k in np.flatnonzero(w.ravel() != g.ravel()).tolist():
                a, b = w.ravel()[k].item(), g.ravel()[k].item()
                kinds.append("value")
                found.append(Element(slot, k, str(a), _bits(a), str(b), _bits(b)))
    return found[:MAX_ELEMENTS], kinds[0] if kinds else "none"


def f32_agree(want: int, got: int, ulps: int = 0) -> bool:
    """Whether an f32 result (bit patterns) agrees: bit for bit, any NaN matching any NaN,
    or within `ulps` of each other for two numbers; but POISON matches only itself, since a
    slot that comes back holding it was left as it started (generators/buffers.py)."""
    if got == POISON != want:
        return False
    if exact.same_f32(want, got):
        return True
    return ulps > 0 and not (exact.is_nan(want) or exact.is_nan(got)) and \
        exact.ulp_distance(want, got) <= ulps


def _f32_elements(slot: int, want: list[int], got: list[int]) -> tuple[list[Element], list[str]]:
    """The f32 elements (bit patterns) that do not agree, and the kind of each difference."""
    found, kinds = [], []
    for k, (a, b) in enumerate(zip(want, got, strict=True)):
        if not f32_agree(a, b):
            kinds.append(_kind(a, b))
            nan = exact.is_nan(a) or exact.is_nan(b)
            found.append(Element(slot, k, exact.f32_to_text(a), f"0x{a:08x}",
                                 exact.f32_to_text(b), f"0x{b:08x}",
                                 None if nan else exact.ulp_distance(a, b)))
    return found, kinds


def _kind(a: int, b: int) -> str:
    if b == POISON:
        return "unwritten"
    if exact.is_nan(a) != exact.is_nan(b):
        return "nan"
    if (a | b) & 0x7FFFFFFF == 0:
        return "signed-zero"
    if (a & 0x7FFFFFFF == 0x7F800000) != (b & 0x7FFFFFFF == 0x7F800000):
        return "infinity"
    return "bits"


def _bits(v) -> str:
    return str(v).lower() if isinstance(v, bool) else f"0x{v & 0xFFFFFFFF:08x}"


def _inputs(source: str, buffers) -> list[dict]:
    slots = cases.buffer_slots(source)
    out = []
    for slot, array in sorted(buffers.items()):
        dtype, shape = slots[slot]
        flat = np.asarray(array).ravel()
        values = ([exact.f32_to_text(b) for b in flat.view(np.uint32).tolist()]
                  if dtype == "f32" else [str(v).lower() for v in flat.tolist()])
        out.append({"slot": slot, "dtype": dtype, "shape": list(shape), "values": values,
                    "bits": cases.format_values(array, dtype).split()})
    return out


def _cone(statements: list, slot: int | None) -> list:
    """The statements the final value of `slot` depends on, by name through operands, loads
    (the stores into the loaded buffer) and calls (the function's body). Every store when no
    slot differs (a status or a failure). Names are looked up in the statement's own scope:
    a function body cannot see the program's names (SPEC.md, "Functions")."""
    scope_of: dict[int, str] = {}
    defined: dict[tuple[str, str], list] = defaultdict(list)
    stores: dict[tuple[str, str], list] = defaultdict(list)
    bodies: dict[str, list] = defaultdict(list)
    scope = ""
    for s in statements:
        if s.op == "def":
            scope = s.operands[0].text
        scope_of[id(s)] = scope
        if scope:
            bodies[scope].append(s)
        if s.target:
            defined[scope, s.target].append(s)
        if s.op == "store" and s.operands:
            stores[scope, s.operands[0].text].append(s)
        if s.op == "end" and s.operands and s.operands[0].kind == "func":
            scope = ""
    buffer_name = {s.attr("slot"): s.target for s in statements if s.op == "buffer"}
    work = list(stores["", buffer_name[slot]]) if slot in buffer_name else \
        [s for s in statements if s.op == "store"]
    seen: dict[int, object] = {}
    while work:
        s = work.pop()
        if id(s) in seen:
            continue
        seen[id(s)] = s
        here = scope_of[id(s)]
        for k, o in enumerate(s.operands):
            if o.kind == "name":
                work += defined.get((here, o.text), [])
                if s.op == "load" and k == 0:
                    work += stores.get((here, o.text), [])
            elif o.kind == "func" and s.op == "call":
                work += bodies.get(o.text, [])
    return sorted(seen.values(), key=lambda s: s.line)


def _rules_applied(program, lines: set[int]) -> set[str]:
    """The rows of the rules table (rules.rule_key) that the gradients on `lines` applied:
    the ops of the nodes their walks visited. A gradient of a gradient walks the first one's
    nodes, so the rules inside it (recip in sqrt's) are among them."""
    found: set[str] = set()
    work = list(program.statements)
    while work:
        s = work.pop()
        if isinstance(s, Loop):
            work += s.body
        elif isinstance(s, Define) and s.expansion is not None and s.line in lines:
            found |= {rule_key(v.node) for v in s.expansion.visits if v.node.op != "load"}
    return found


def _roots(cone: list) -> set:
    """The values stored: the statements a store in the cone names."""
    names = {s.operands[1].text for s in cone if s.op == "store" and len(s.operands) > 1}
    return {s for s in cone if s.target in names}


def save_case(d: Divergence, source: str, buffers, want: Outcome,
              folder: pathlib.Path) -> pathlib.Path:
    """The divergence as a case file that replays it: the inputs, and the reference's outcome
    as the expectation. Written to a temporary name and renamed, so a reader (or a run killed
    with SIGKILL) never sees half a file. The name is the content's hash: one file a case."""
    outputs = want.buffers if want.status == "ok" else None
    error = "any" if want.status == "rejected" else None
    text = cases.format_case(
        source, inputs=buffers, outputs=outputs, error=error,
        run_error=want.status == "run-error",
        comments=[f"divergence found by {d.check}: {d.summary}",
                  f"signature: {d.key}", *([d.description] if d.description else [])])
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = folder / f"{_slug(d.check)}-{digest}.ir"
    write_atomically(path, text)
    return path


def save_tape_case(d: Divergence, tape, want: Outcome, folder: pathlib.Path) -> pathlib.Path:
    """A tape's divergence as a tape case file (JSON), named by its content's hash."""
    text = format_tape_case(
        tape, derivatives=want.derivatives if want.status == "ok" else None,
        error=(want.message or "any") if want.status == "rejected" else None,
        description=f"divergence found by {d.check}: {d.summary}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_slug(d.check)}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.json"
    write_atomically(path, text)
    return path


def write_atomically(path: pathlib.Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w") as stream:
        stream.write(text)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)


def replay_command(case_file: pathlib.Path, impl_spec: str,
                   base: pathlib.Path | None = None) -> str:
    """The command that replays a case file, as the user would type it in `base` (where the
    suite was run): paths relative to it where they lie inside it, and the user's Python."""
    python = _shown(pathlib.Path(sys.executable), base)
    return (f"{shlex.quote(str(python))} -m gradient_conformance replay "
            f"{shlex.quote(str(_shown(case_file, base)))} --impl={shlex.quote(impl_spec)}")


def _shown(path: pathlib.Path, base: pathlib.Path | None) -> pathlib.Path:
    """`path` relative to `base` when it lies inside it (and does not climb out of it)."""
    if base is None:
        return path
    try:
        return pathlib.Path(os.path.relpath(path, base)) if pathlib.Path(
            os.path.abspath(path)).is_relative_to(base) else path
    except ValueError:
        return path


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:60]


def _first(text: str) -> str:
    """The line of a pytest failure that says what failed (its first `E` line)."""
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    lines = text.strip().splitlines()
    return lines[-1] if lines else "failed"
