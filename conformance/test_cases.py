"""The worked examples and the project's own case files, through the implementation: detach,
higher order, hash consing, loops, calls and i32 semantics each have cases that fail without
them. Errors are matched by kind only: the wording is the reference's."""

from __future__ import annotations

import pathlib

import pytest

from reference import cases

from .checks import TRANSCENDENTAL, declared, difference, expected
from .implementation import Outcome
from .record import RECORDER

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = [ROOT / "cases", ROOT.parent / "shared" / "spec" / "examples"]
PATHS = cases.case_paths([f for f in FOLDERS if f.is_dir()])


@pytest.mark.parametrize("path", PATHS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_case_file(impl, path):
    run_case_file(impl, path)


def run_case_file(impl, path):
    """One case file through the implementation: its expected rejection (by kind only), its
    run-time error, or its outputs (bit for bit, or within the declared ulps where exp2, log2
    or sin is used)."""
    case = cases.load_case(path)
    features = _features(case.source)
    if features & impl.unsupported():
        pytest.skip(f"uses {sorted(features & impl.unsupported())}, unsupported")
    RECORDER.case(features - {"def", "end", "return", "buffer"})
    if case.error is not None:
        outcome = impl.build_only(case.source)
        if outcome.status != "rejected":
            RECORDER.diverged(case.source, {}, Outcome("rejected", message=case.error), outcome,
                              summary=f"expected a rejection ({case.error}), got "
                              f"{outcome.status}", rule=case.error)
        assert outcome.status == "rejected", f"expected a rejection ({case.error}), got " \
            f"{outcome.status} {outcome.message}"
        return
    slots = declared(case.source)
    buffers = cases.initial_buffers(case, slots)
    got = impl.run_case(case.source, buffers, slots)
    want = expected(case.source, buffers)
    if case.run_error:
        if got.status != "run-error":
            RECORDER.diverged(case.source, buffers, want, got,
                              summary=f"expected a run-time error, got {got.status}")
        assert got.status == "run-error", f"expected a run-time error, got {got.status}"
        return
    ulps = max((impl.ulps(op) for op in features & TRANSCENDENTAL), default=0)
    problem = difference(want, got, ulps=ulps)
    if problem is not None:
        RECORDER.diverged(case.source, buffers, want, got, summary=problem,
                          description=f"case file {path.name}")
    assert problem is None, problem


def _features(source) -> set[str]:
    """The ops and features (higher_order, reduce_mul) a case file uses, as the generators
    name them; none for a file that does not parse (it is an error case)."""
    from generators.writer import features_of
    try:
        return set(features_of(source))
    except Exception:  # noqa: BLE001 - a case that does not parse has no features to skip on
        return set()
