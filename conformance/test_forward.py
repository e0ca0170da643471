"""Forward results: bit for bit against the reference, and exp2/log2/sin within the ulps an
implementation declares. SPEC.md, "Values and arithmetic"."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from generators import exact_programs, programs

from .checks import TRANSCENDENTAL, check, declared, difference, exclusions, expected, supported


@given(data=st.data())
def test_exact_programs_bit_for_bit(impl, data):
    case = data.draw(exact_programs(exclude=exclusions(impl)))
    supported(impl, case)
    check(impl, case)


@given(data=st.data())
def test_programs_with_transcendentals(impl, data):
    """Bit for bit for an implementation that claims correct rounding everywhere."""
    if any(impl.ulps(op) for op in TRANSCENDENTAL):
        pytest.skip("declares ulps for exp2/log2/sin: compared op by op instead")
    case = data.draw(programs(exclude=exclusions(impl)))
    supported(impl, case)
    check(impl, case)


@pytest.mark.parametrize("op", sorted(TRANSCENDENTAL))
@given(values=st.lists(st.floats(width=32), min_size=1, max_size=16))
def test_transcendental_within_declared_ulps(impl, op, values):
    if op in impl.unsupported():
        pytest.skip(f"{op} is unsupported")
    source = (f"%a = buffer slot=0 dtype=f32 shape=[{len(values)}]\n%x = load %a\n"
              f"%y = {op} %x\nstore %a %y\n")
    buffers = {0: np.array(values, np.float32)}
    got = impl.run_case(source, buffers, declared(source))
    problem = difference(expected(source, buffers), got, ulps=impl.ulps(op))
    assert problem is None, f"{op}: {problem} (declared {impl.ulps(op)} ulps)"
