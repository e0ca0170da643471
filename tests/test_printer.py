"""`expand` and `--trace`: the expanded text is a program with the same results, bit for bit,
and the trace shows the shares each node received in arrival order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradient_conformance import reference
from gradient_conformance.reference import cases
from gradient_conformance.reference.printer import format_expanded, format_trace
from tests.conftest import CASES, SHARED_EXAMPLES
from tests.smooth import smooth_programs

VALID = [p for p in cases.case_paths([CASES, SHARED_EXAMPLES])
         if not cases.load_case(p).error and not cases.load_case(p).run_error]


def _same_results(source: str, buffers: dict) -> None:
    program = reference.compile_program(source)
    expanded = format_expanded(program)
    assert "gradient" not in "\n".join(line.split("#")[0] for line in expanded.splitlines())
    want = reference.Runner(program)({k: v.copy() for k, v in buffers.items()})
    got = reference.build(expanded)({k: v.copy() for k, v in buffers.items()})
    for slot in want:
        assert cases.same_bits(want[slot], got[slot]), (slot, expanded)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_expanded_case_gives_the_same_bits(path):
    case = cases.load_case(path)
    _same_results(case.source, cases.initial_buffers(case, cases.buffer_slots(case.source)))


@settings(max_examples=60)
@given(smooth_programs(second_order=False), st.data())
def test_expanded_generated_program_gives_the_same_bits(case, data):
    floats = st.floats(-4, 4, width=32)
    shape = case.shape
    size = int(np.prod(shape))
    buffers = {0: np.array([data.draw(floats) for _ in range(size)], np.float32).reshape(shape),
               1: np.array([data.draw(floats) for _ in range(size)], np.float32).reshape(shape),
               2: np.zeros((), np.float32), 3: np.zeros(shape, np.float32),
               4: np.zeros((), np.float32)}
    _same_results(case.source, buffers)


def test_trace_lists_shares_in_arrival_order():
    source = (SHARED_EXAMPLES / "accumulation_order.ir").read_text() if \
        SHARED_EXAMPLES.is_dir() else (CASES / "gradient" / "arrival_not_reversed.ir").read_text()
    program = reference.compile_program(source)
    trace = format_trace(program)
    expanded = format_expanded(program)
    # x's line in the first walk names three shares, and they are mul nodes of the expansion
    received = [line for line in trace.splitlines() if "received [" in line and "," in line]
    assert received, trace
    shares = received[0].split("[")[1].split("]")[0].split(", ")
    assert len(shares) == 3
    for share in shares:
        assert f"{share} = mul" in expanded


def test_trace_says_when_x_receives_nothing():
    program = reference.compile_program((CASES / "gradient" / "zeros_rank_two.ir").read_text())
    trace = format_trace(program)
    assert "%g = gradient %y %x" in trace
    assert "is x" not in trace  # the walk never reached x
