"""The case files the package ships (the project's own, and a copy of the shared worked
examples) through the implementation: detach, higher order, hash consing, loops, calls and
i32 semantics each have cases that fail without them. SPEC.md, "Case files".

Errors are matched by kind only: the wording is the reference's. Expected outputs are the
reference's on the same initial contents, which the `#: out` lines agree with (the project's
own tests check every file against the reference).
"""

from __future__ import annotations

import pytest

from gradient_conformance import resource
from gradient_conformance.conformance.checks.compare import (
    TRANSCENDENTAL,
    case_file_buffers,
    declared,
    difference,
    expected,
)
from gradient_conformance.conformance.implementation import Outcome
from gradient_conformance.conformance.record import RECORDER
from gradient_conformance.reference import cases

CASES = resource("cases")
PATHS = cases.case_paths([CASES])


def case_id(path) -> str:
    """A case file's id: its path within the cases, as `gradient/max_tie.ir`."""
    return path.relative_to(CASES).as_posix()


@pytest.mark.parametrize("path", PATHS, ids=case_id)
def test_case_file(impl, path):
    run_case_file(impl, path)


def run_case_file(impl, path):
    """One case file through the implementation: its expected rejection (by kind only), its
    run-time error (an index out of range), or its outputs (bit for bit, or within the
    declared ulps where exp2, log2 or sin is used)."""
    case = cases.load_case(path)
    features = _features(case.source)
    if features & impl.unsupported():
        pytest.skip(f"uses {sorted(features & impl.unsupported())}, unsupported")
    RECORDER.case(features)
    if case.error is not None:
        outcome = impl.build_only(case.source)
        if outcome.status != "rejected":
            RECORDER.diverged(case.source, {}, Outcome("rejected", message=case.error), outcome,
                              summary=f"expected a rejection ({case.error}), got "
                              f"{outcome.status}", description=f"case file {case_id(path)}",
                              rule=case.error)
        assert outcome.status == "rejected", f"expected a rejection ({case.error}), got " \
            f"{outcome.status} {outcome.message}"
        return
    slots = declared(case.source)
    buffers = case_file_buffers(case, slots)
    got = impl.run_case(case.source, buffers, slots)
    want = expected(case.source, buffers)
    ulps = max((impl.ulps(op) for op in features & TRANSCENDENTAL), default=0)
    problem = difference(want, got, ulps=ulps)
    if problem is not None:
        RECORDER.diverged(case.source, buffers, want, got, summary=problem,
                          description=f"case file {case_id(path)}")
    assert problem is None, problem


def _features(source) -> set[str]:
    """The ops and features (higher_order, reduce_mul) a case file uses, as the generators
    name them; none for a file that does not parse (it is an error case)."""
    from gradient_conformance.generators.writer import features_of
    from gradient_conformance.reference.errors import IRError
    try:
        return set(features_of(source))
    except IRError:
        return set()
