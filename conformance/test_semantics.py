"""The semantics a gradient depends on, topic by topic: each test runs case files that fail
without it. (They also run among all case files in test_cases.py; here they carry names.)"""

from __future__ import annotations

import pytest

from .test_cases import ROOT, run_case_file

SHARED = ROOT.parent / "shared" / "spec" / "examples"
TOPICS = {
    "detach": ["cases/gradient/detach_blocks_one_edge.ir",  # x*detach(x) is x; one edge only
               "cases/gradient/detached_loss.ir",  # a detached loss has zeros
               "shared:lesson_detach.ir"],
    "higher_order": ["shared:second_derivative.ir"],
    "hash_consing": ["cases/gradient/hash_consing_shares.ir",
                     "cases/gradient/range_keeps_nodes_apart.ir", "cases/ops/memory_order.ir"],
    "loops_and_calls": ["cases/ops/loop_carries_memory.ir", "cases/ops/nested_ranges.ir",
                        "cases/ops/calls.ir", "cases/near_miss/gradient_in_loop.ir",
                        "cases/near_miss/call_behind_i32.ir"],
    "i32": ["cases/ops/i32_c_semantics.ir", "cases/ops/casts.ir", "cases/ops/logic.ir"],
}


def _path(name):
    return SHARED / name.removeprefix("shared:") if name.startswith("shared:") else ROOT / name


@pytest.mark.parametrize(("topic", "name"), [(t, n) for t, ns in TOPICS.items() for n in ns],
                         ids=lambda v: v.split("/")[-1] if "/" in v or ":" in v else v)
def test_semantics(impl, topic, name):
    path = _path(name)
    if not path.exists():
        pytest.skip(f"{path} is not here (../shared missing?)")
    run_case_file(impl, path)
