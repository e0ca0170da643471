"""The case files the package ships (the project's own, and a copy of the shared worked
examples) through the implementation: detach, higher order, hash consing, loops, calls and
i32 semantics each have cases that fail without them. docs/suite.md, "Case files".

Errors are matched by kind only: the wording is the reference's. Expected outputs are the
reference's on the same initial contents, which the `#: out` lines agree with (the project's
own tests check every file against the reference).
"""

from __future__ import annotations

import pytest

from gradient_conformance import resource
from gradient_conformance.conformance import running
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.reference import cases
from gradient_conformance.reference.ops import TRANSCENDENTAL

CASES = resource("cases")
PATHS = cases.case_paths([CASES])
# Case files that test a rule's op form or the order of a sum: they hold bit for bit only.
BIT_EXACT = frozenset(line.split("#")[0].strip() for line in
                      (CASES / "bit_exact_gradients.txt").read_text().splitlines()
                      if line.split("#")[0].strip())


def case_id(path) -> str:
    """A case file's id: its path within the cases, as `examples/max_tie.ir`."""
    return path.relative_to(CASES).as_posix()


@pytest.mark.parametrize("path", PATHS, ids=case_id)
def test_case_file(impl, tally, path):
    """Each case file the package ships, through the implementation: its rejection, run-time
    error or outputs."""
    run_case_file(impl, tally, path)


def run_case_file(impl, tally, path):
    """One case file through the implementation: its expected rejection (by kind only), its
    run-time error (an index out of range), or its outputs (bit for bit, or within the
    declared ulps where exp2, log2 or sin is used)."""
    if case_id(path) in BIT_EXACT and not impl.capabilities["bit_exact_gradients"]:
        pytest.skip("it tests a rule's op form or the order of a sum, which hold only bit for "
                    "bit, and the implementation does not claim bit-exact gradients "
                    "(CAPABILITIES)")
    case = cases.load_case(path)
    reading = running.Reading(case.source)
    features = reading.features  # none for a file that does not parse: an error case
    if reading.uses & impl.unsupported():
        pytest.skip(f"uses {sorted(reading.uses & impl.unsupported())}, unsupported")
    tally.case(features)
    description = f"case file {case_id(path)}"
    if case.error is not None:
        want, got = Outcome("rejected", message=case.error), impl.build_only(case.source)
        tally.reach(reading)
        difference = compare(want, got)
        if difference is not None:
            raise tally.diverged(running.Finding(
                f"expected a rejection ({case.error}): {difference}", want, got,
                running.ProgramCase(reading), difference, description, rule=case.error))
        return
    buffers = running.case_file_buffers(case, reading.slots)
    trapping = running.traps(impl, reading, buffers)
    if trapping:
        pytest.skip(f"it reaches {', '.join(sorted(trapping))}, where the implementation "
                    "declares that integer division traps (CAPABILITIES)")
    got = impl.run_case(case.source, buffers, reading.slots)
    want, got, left_out = running.claimed(impl, reading, reading.outcome(buffers), got)
    if left_out:
        description += (f"; slots {left_out} left out: made from a gradient, whose bits the "
                        "implementation does not claim")
    ulps = max((impl.ulps(op) for op in features & TRANSCENDENTAL), default=0)
    running.verdict(tally, reading, buffers, want, got, ulps=ulps, description=description)
