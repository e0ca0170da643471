"""The semantics a gradient depends on, topic by topic: each test runs case files that fail
without it. (They also run among all case files in test_cases.py; here they carry names.)
docs/suite.md, "Case files". Each topic is an area of the rubric, named in TOPIC_AREAS
(docs/grading.md, "The rubric")."""

from __future__ import annotations

import pytest

from gradient_conformance.conformance.checks.test_cases import CASES, run_case_file

TOPICS = {
    # Every program the spec refuses to build: its syntax, names, types and shapes.
    "text": sorted(p.relative_to(CASES).as_posix() for p in (CASES / "errors").glob("*.ir")),
    "detach": ["gradient/detach_blocks_one_edge.ir",  # x*detach(x) is x; one edge only
               "gradient/detached_loss.ir",  # a detached loss has zeros
               "examples/lesson_detach.ir"],
    "higher_order": ["examples/second_derivative.ir"],
    "hash_consing": ["gradient/hash_consing_shares.ir", "gradient/range_body_shares_outer_nodes.ir",
                     "ops/memory_order.ir"],
    "loops_and_calls": ["ops/loop_carries_memory.ir", "ops/nested_ranges.ir", "ops/calls.ir",
                        "near_miss/gradient_in_loop.ir", "near_miss/call_behind_i32.ir"],
    "i32": ["ops/i32_c_semantics.ir", "ops/casts.ir", "ops/logic.ir"],
}
# Each topic's area (read from this source by conformance/areas.py, `topic_areas`): a
# section of SPEC.md, or the topic's own name where the spec spreads it over several.
TOPIC_AREAS = {
    "text": "Text form",
    "detach": "Detach",
    "higher_order": "gradient",
    "hash_consing": "Hash consing",
    "loops_and_calls": "Loops and calls",
    "i32": "Values and arithmetic",
}


@pytest.mark.parametrize(("topic", "name"), [(t, n) for t, ns in TOPICS.items() for n in ns],
                         ids=lambda v: v.split("/")[-1])
def test_semantics(impl, tally, topic, name):
    """The case files of one semantic topic (i32, signed zeros, NaN, ...), as test_case_file
    runs them."""
    run_case_file(impl, tally, CASES / name)
