"""How a check runs a case file (test_cases.py): its program, its expectations, and the
messages its `#: error-mentions` lines ask for. docs/suite.md, "The conformance suite"."""

from __future__ import annotations

import re

from gradient_conformance.conformance.findings import Finding, ProgramCase
from gradient_conformance.conformance.outcome import Difference, Outcome, compare
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.conformance.running import (
    _skip,
    beyond_limits,
    bits_are_the_point,
    compare_claims,
    trapped_by,
    unsupported_by,
)
from gradient_conformance.conformance.tallies import LINES, STATUS, TRUTH, UNCHECKED, WORDING
from gradient_conformance.reference import cases
from gradient_conformance.reference.cases import output_only_slots, poisoned
from gradient_conformance.reference.ops import (
    TRANSCENDENTAL,
)


def check_case_file(impl, tally, path, description: str) -> None:
    """One case file through the implementation: its expected rejection (by kind only), its
    run-time error (an index out of range), or its outputs (bit for bit, or within the
    declared ulps where exp2, log2 or sin is used; the slots made from a gradient against
    the true derivative where the implementation claims no bit-exact gradients, unless the
    file's point is their bits, as `replay` compares: compare_claims). A file with
    nothing left to compare is skipped, saying why. The case-file checks' own
    (checks/test_cases.py, test_semantics.py), here so that a test can run it beside
    `replay`: docs/suite.md, "What a pass compared"."""
    case = cases.load_case(path)
    if case.decisions:  # said with every divergence of the file (SPEC.md's opening)
        description += ("; the file is labelled " + ", ".join(
            f"SPEC.md's Decision ({name})" for name in case.decisions) + ": its expectation "
            "follows this project's decision where the course's text is silent")
    reading = Reading(case.source)
    features = reading.features  # none for a file that does not parse: an error case
    if why := unsupported_by(impl, reading):
        _skip(why)
    tally.case(features)
    if case.error is not None:
        if why := beyond_limits(reading.outcome({}, build_only=True)):
            _skip(why)
        want, got = Outcome("rejected", message=case.error), impl.build_only(case.source)
        tally.reach(reading)
        tally.compared(STATUS, 1)
        difference = compare(want, got)
        if difference is not None:
            raise tally.diverged(Finding(
                f"expected a rejection ({case.error}): {difference}", want, got,
                ProgramCase(reading), difference, description, rule=case.error))
        check_mentions(impl, tally, case, reading, got, description)
        return
    buffers = case_file_buffers(case, reading.slots)
    if why := trapped_by(impl, reading, buffers) or \
            beyond_limits(reading.outcome(buffers, build_only=True)):
        _skip(why)
    got = impl.run_case(case.source, buffers, reading.slots)
    ulps = max((impl.ulps(op) for op in features & TRANSCENDENTAL), default=0)
    left_out = compare_claims(impl, tally, reading, buffers, reading.outcome(buffers), got,
                              ulps=ulps, description=description,
                              bits_are_the_point=bits_are_the_point(path))
    # Nothing of what the file names as its outputs compared (as `replay`, which compares
    # those alone, says NOT COMPARED): the other slots it compared are its inputs.
    listed = set(case.outputs) | set(case.near)
    if not tally.ledger or (listed and listed <= set(left_out) and TRUTH not in tally.ledger):
        _skip("nothing the file names as its outputs is left to compare: "
              + "; ".join(tally.left_out))


def check_mentions(impl, tally, case, reading, got: Outcome, description: str) -> None:
    """A rejection's message beside the file's `#: error-mentions` lines (docs/suite.md,
    "What a pass compared"): a mention that gives a line ("line 5 ...") asks the message for
    that line's number, as ir.md asks of every error in the text; the rest of its words are
    the reference's, left out, saying so. Not at all where CAPABILITIES["messages"] is
    False."""
    if not case.mentions:
        return
    if not impl.capabilities.get("messages", True):
        tally.leave_out(UNCHECKED, len(case.mentions))
        return
    for mention in case.mentions:
        line = re.match(r"line (\d+)\b", mention)
        if line is None:
            tally.leave_out(WORDING, 1)
            continue
        tally.compared(LINES, 1)
        if not gives_line(got.message, int(line.group(1))):
            said = (f"the rejection's message does not give the line, {line.group(1)} (the "
                    f"file says it mentions {mention!r}): {got.message!r}")
            raise tally.diverged(Finding(
                said, Outcome("rejected", message=mention), got, ProgramCase(reading),
                Difference(said, "message"), description, rule=case.error))
        if mention.strip() != line.group(0):
            tally.leave_out(WORDING, 1)


def gives_line(message: str, number: int) -> bool:
    """Whether a rejection's message gives the line `number`: in the implementation's own
    words, not in the place the suite adds after them (" (FILE:LINE)", calling.describe),
    nor inside a word or a path (a checkout in /tmp/ci4 gave every message a "4")."""
    words = re.sub(r" \((?:raised in )?[^()]*:\d+\)(?: \([^()]*:\d+\))?$", "", message)
    return re.search(rf"(?<![\w/.\-]){number}(?!\d)", words) is not None


def case_file_buffers(case, slots) -> dict:
    """A case file's initial contents: its `#: in` lines, zeros for the other slots it
    loads, and POISON for a slot it only stores into (reference/ops.py says why)."""
    buffers = cases.initial_buffers(case, slots)
    stored_only = output_only_slots(case.source) - set(case.inputs)
    return {slot: poisoned(slots[slot]) if slot in stored_only else array
            for slot, array in buffers.items()}


def single_op_source(op: str, count: int) -> str:
    """`op` over `count` f32 values of slot 0, stored back: how one op is measured alone."""
    return (f"%a = buffer slot=0 dtype=f32 shape=[{count}]\n%x = load %a\n%y = {op} %x\n"
            "store %a %y\n")


# --- the truth (test_derivative.py) ---------------------------------------------------------
