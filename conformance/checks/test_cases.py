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
from gradient_conformance.conformance import casefiles
from gradient_conformance.reference import cases

CASES = resource("cases")
PATHS = cases.case_paths([CASES])


def case_id(path) -> str:
    """A case file's id: its path within the cases, as `examples/max_tie.ir`."""
    return path.relative_to(CASES).as_posix()


@pytest.mark.parametrize("path", PATHS, ids=case_id)
def test_case_file(impl, tally, path):
    """Each case file the package ships, through the implementation: its rejection, run-time
    error or outputs."""
    run_case_file(impl, tally, path)


def run_case_file(impl, tally, path):
    """One case file through the implementation (casefiles.check_case_file)."""
    casefiles.check_case_file(impl, tally, path, f"case file {case_id(path)}")
