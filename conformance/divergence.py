"""A divergence record, built once from what the check found. docs/reports.md, "Reports".

`describe` turns a check's `Finding` (conformance/findings.py) into the report's `Divergence`:
the elements that differ, the lines to highlight, the reference's trace and expanded program,
the signature the fuzzer deduplicates on, and the text of the case file that replays it; the
diagnosis and location are the explanation stage's (conformance/explain.py). It
reads the program the check already read: the parse and the spec's build are the check's
own, and the cone of the differing slot is walked over the built graph, whose
nodes know their lines. `save` writes the case file wherever the store is kept.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shlex
import shutil
import sys
import tempfile

import numpy as np

from gradient_conformance.conformance.findings import Finding, ProgramCase, TapeCase
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.readings import rejected_as
from gradient_conformance.reference import cases, exact
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.ops import FEATURES, feature
from gradient_conformance.reference.printer import format_expanded, format_trace
from gradient_conformance.reference.program import Define, Program, cone, walk
from gradient_conformance.reference.rules import rule_key
from gradient_conformance.reference.tape import backprop_trace, format_tape_case
from gradient_conformance.reports.records import Divergence, case_file_name, visible

# Ops that move values about without computing: they are in every program's cone, and say
# nothing about which rule is wrong.
STRUCTURE = frozenset({"buffer", "load", "store", "def", "end", "return", "range", "call"})


def describe(check: str, test_id: str, finding: Finding) -> Divergence:
    """The divergence record of `finding`, found by `check` (the test `test_id`), not yet
    explained."""
    case = finding.case
    if isinstance(case, TapeCase):
        return _describe_tape(check, test_id, finding, case)
    return _describe_program(check, test_id, finding, case)


def _describe_program(check: str, test_id: str, finding: Finding,
                      case: ProgramCase) -> Divergence:
    """A program's divergence: its text with the differing slots' cone and stores
    highlighted, the reference's trace, and the case file."""
    reading, want, got = case.reading, finding.want, finding.got
    difference = finding.difference or compare(want, got)
    elements = difference.elements if difference else []
    kind = difference.kind if difference else "none"
    statements = reading.statements or []
    program, _, stored, listed = _read_cone(case, want, elements)
    gradients = {s.line for s in statements if s.op == "gradient"}
    # A rejection is about its gradients (reports/terminal.py says so over the program).
    highlight = sorted(gradients if want.status == "rejected" else stored)
    trace = expanded = ""
    if program is not None and gradients and want.status == "ok":
        trace, expanded = format_trace(program), format_expanded(program)
    case_text = cases.format_case(
        reading.source, inputs=case.buffers, slots=reading.slots,
        outputs=want.buffers if want.status == "ok" else None,
        # The kind the reference rejects it by, kept (issue 53: a saved case said only
        # "#: error" where its file said "#: error invalid").
        error=(rejected_as(reading) or "any") if want.status == "rejected" else None,
        run_error=want.status == "run-error",
        comments=[f"divergence found by {check}: {finding.summary}",
                  f"signature: {check} / {finding.rule or '+'.join(listed)} / {kind}",
                  *([finding.description] if finding.description else [])],
        header_last=True)  # the run's line numbers are the file's, and replay's
    return Divergence(
        check=check, test_id=test_id, summary=visible(finding.summary),
        source=visible(reading.source), description=visible(finding.description),
        inputs=_inputs(reading.slots, case.buffers) if statements else [],
        expected_status=want.status, actual_status=got.status,
        expected_message=want.message, actual_message=got.message,
        elements=elements, highlight=highlight, trace=trace, expanded=expanded,
        signature=(check, finding.rule or "+".join(listed), kind), statements=len(statements),
        comparison=finding.comparison, ops=listed, case_text=case_text,
        case_name=case_file_name(check, case_text, ".ir"))


def _describe_tape(check: str, test_id: str, finding: Finding, case: TapeCase) -> Divergence:
    """A tape's divergence: the tape one entry a line (the first differing entry
    highlighted), and each differing derivative as an element of slot 0. Its subject is the
    kinds of entry on the tape, or the rejection expected."""
    tape, want, got = case.tape, finding.want, finding.got
    lines = [f"{k}: {entry!r}" for k, entry in enumerate(tape)] if isinstance(tape, list) \
        else [repr(tape)]
    difference = finding.difference or compare(want, got)
    elements = difference.elements if difference else []
    kinds = sorted({str(e[0]) for e in tape if isinstance(e, list | tuple) and e}) \
        if isinstance(tape, list) else []
    subject = want.message if want.status == "rejected" else "tape:" + "+".join(kinds)
    case_text = format_tape_case(
        tape, derivatives=want.derivatives if want.status == "ok" else None,
        error=(want.message or "any") if want.status == "rejected" else None,
        description=f"divergence found by {check}: {finding.summary}")
    return Divergence(
        check=check, test_id=test_id, summary=visible(finding.summary),
        source=visible("\n".join(lines)), description=visible(finding.description),
        expected_status=want.status, actual_status=got.status,
        expected_message=want.message, actual_message=got.message, elements=elements,
        highlight=[elements[0].index + 1] if elements else [],
        signature=(check, subject, difference.kind if difference else "none"),
        statements=len(lines), case_text=case_text, trace=_tape_trace(tape, want),
        case_name=case_file_name(check, case_text, ".json"))


def _tape_trace(tape, want: Outcome) -> str:
    """The reference's backprop of a tape it accepts, beside what the implementation gave."""
    if want.status != "ok":
        return ""
    try:
        return visible(backprop_trace(tape))
    except IRError:
        return ""


def _read_cone(case: ProgramCase, want: Outcome, elements) \
        -> tuple[Program | None, set[int], set[int], list[str]]:
    """(the built program, the lines of the first differing slot's cone, the lines that
    store it, the ops and rules of that cone, structure left out): what a program's
    divergence is about."""
    reading = case.reading
    statements = reading.statements or []
    try:
        program = reading.program() if statements and want.status != "rejected" else None
    except IRError:
        program = None
    if program is not None:
        lines, stored = _cone(program, elements[0].slot if elements else None)
    else:  # rejected, or not even parsed: the whole program is the cone
        lines, stored = {s.line for s in statements}, {s.line for s in statements
                                                        if s.op == "store"}
    gradients = {s.line for s in statements if s.op == "gradient"}
    ops = {feature(s.op, s.attr("op")) for s in statements if s.line in lines}
    if program is not None and gradients and want.status == "ok":
        ops |= _rules_applied(program, lines & gradients)
    return program, lines, stored, sorted((ops & FEATURES) - STRUCTURE)


def subject(finding: Finding) -> tuple[str, str]:
    """(what a finding is about, the kind of difference): its signature without the check,
    by which a check tells a divergence it has found from another (failure.py, a check's
    second look), and the reducer one program's divergence from another's."""
    case = finding.case
    if isinstance(case, TapeCase):
        return tuple(describe("", "", finding).signature[1:])  # type: ignore[return-value]
    difference = finding.difference or compare(finding.want, finding.got)
    elements = difference.elements if difference else []
    listed = _read_cone(case, finding.want, elements)[3]
    return (finding.rule or "+".join(listed), difference.kind if difference else "none")


def undescribed(check: str, test_id: str, text: str) -> Divergence:
    """A failed check that raised no divergence (an error in the check, say): its text."""
    return Divergence(check=check, test_id=test_id, summary=visible(_first(text)),
                      actual_message=visible(text), signature=(check, "", "failed"),
                      location={"reason": "the check failed without a divergence to probe "
                                "(an error of the check itself: its text is above)"})


def _cone(program: Program, slot: int | None) -> tuple[set[int], set[int]]:
    """(the lines the final value of `slot` depends on, the lines that store it and make the
    value stored); every store's, when no slot differs (a status or a failure)."""
    nodes, reached = cone(program, slot)
    chosen = [s for s in reached if slot is None or s.buffer.attr("slot") == slot]
    return ({n.line for n in nodes} | {s.line for s in reached},
            {s.line for s in chosen} | {s.value.line for s in chosen})


def _rules_applied(program: Program, lines: set[int]) -> set[str]:
    """The ops whose rows of the rules table the gradients on `lines` applied: the nodes
    their walks visited. A gradient of a gradient walks the first one's nodes, so the rules
    inside it (recip in sqrt's) are among them."""
    return {feature(*rule_key(v.node).partition(".")[::2]) for s in walk(program.statements)
            if isinstance(s, Define) and s.expansion is not None and s.line in lines
            for v in s.expansion.visits}


def _inputs(slots, buffers) -> list[dict]:
    out = []
    for slot, array in sorted(buffers.items()):
        dtype, shape = slots[slot]
        flat = np.asarray(array).ravel()
        values = ([exact.f32_to_text(b) for b in flat.view(np.uint32).tolist()]
                  if dtype == "f32" else [str(v).lower() for v in flat.tolist()])
        out.append({"slot": slot, "dtype": dtype, "shape": list(shape), "values": values,
                    "bits": cases.format_values(array, dtype).split()})
    return out


def save(d: Divergence, folder: pathlib.Path, impl_spec: str,
         base: pathlib.Path | None = None) -> pathlib.Path | None:
    """Write the divergence's case file into `folder`, and say in `d` where it is and how
    to replay it (run from `base`). None for a divergence without a case, or one that could
    not be written (a folder the user may not write, a full disk): `d` says so, and the run
    goes on."""
    if not d.case_text:
        return None
    path = folder / d.case_name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(path, d.case_text)
    except OSError as problem:
        d.case_file = f"not saved ({shown(folder, base)}: {problem.strerror or problem})"
        return None
    d.case_file = str(shown(path, base))
    d.replay = replay_command(path, impl_spec, base)
    return path


def write_atomically(path: pathlib.Path, text: str) -> None:
    """Written to a temporary name and renamed, so that a reader (or a run killed with
    SIGKILL) never sees half a file. The temporary file is made new (O_EXCL: never an
    existing file, nor through a link planted at its name) with a name nobody can guess
    (docs/isolation.md, "The suite's own inputs")."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                             dir=path.parent)
    try:
        with os.fdopen(descriptor, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644 & ~_umask())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _umask() -> int:
    """This process's umask (read by setting it, and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def replay_command(case_file: pathlib.Path, impl_spec: str,
                   base: pathlib.Path | None = None) -> str:
    """The command that replays a case file, as the user would type it in `base` (where the
    suite was run): `gradient-conformance replay ...` where that command on the PATH is this
    installation's (so a report sent to someone else shows no path of this machine's); else
    this installation's command, or its Python, by path, relative to `base` where it lies
    inside it."""
    return (f"{_command(base)} replay {shlex.quote(str(shown(case_file, base)))} "
            f"--impl={shlex.quote(impl_spec)}")


def _command(base: pathlib.Path | None) -> str:
    script = pathlib.Path(sys.executable).parent / "gradient-conformance"
    on_path = shutil.which("gradient-conformance")
    if on_path is not None and script.exists() and os.path.samefile(on_path, script):
        return "gradient-conformance"
    if script.exists():
        return shlex.quote(str(shown(script, base)))
    return f"{shlex.quote(str(shown(pathlib.Path(sys.executable), base)))} -m gradient_conformance"


def shown(path: pathlib.Path, base: pathlib.Path | None) -> pathlib.Path:
    """`path` relative to `base` when it lies inside it (and does not climb out of it)."""
    if base is None:
        return path
    try:
        return pathlib.Path(os.path.relpath(path, base)) if pathlib.Path(
            os.path.abspath(path)).is_relative_to(base) else path
    except ValueError:
        return path


def _first(text: str) -> str:
    """The line of a pytest failure that says what failed (its first `E` line)."""
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    lines = text.strip().splitlines()
    return lines[-1] if lines else "failed"

