"""Forward results: bit for bit against the reference, and exp2/log2/sin within the ulps an
implementation declares. SPEC.md, "Values and arithmetic"."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance import running
from gradient_conformance.generators import exact_programs, programs
from gradient_conformance.generators.buffers import ANY_F32
from gradient_conformance.generators.hard_to_round import HARD_TO_ROUND
from gradient_conformance.reference import exact
from gradient_conformance.reference.ops import TRANSCENDENTAL, elementwise

RANK = 1  # where the suite runs these checks (plugin.rank): cheaper, more telling first


@given(data=st.data())
def test_exact_programs_bit_for_bit(impl, tally, data):
    case = data.draw(exact_programs(exclude=running.exclusions(impl)))
    running.supported(impl, case, tally)
    running.check_case(impl, tally, case)


@given(data=st.data())
def test_programs_with_transcendentals(impl, tally, data):
    """Bit for bit for an implementation that claims correct rounding everywhere."""
    if any(impl.ulps(op) for op in TRANSCENDENTAL):
        pytest.skip("declares ulps for exp2/log2/sin: compared op by op instead")
    case = data.draw(programs(exclude=running.exclusions(impl)))
    running.supported(impl, case, tally)
    running.check_case(impl, tally, case)


@pytest.mark.parametrize("op", sorted(TRANSCENDENTAL))
@given(data=st.data())
def test_transcendental_within_declared_ulps(impl, tally, op, data):
    """Any f32 inputs, and the hardest to round (generators/hard_to_round.py)."""
    hard = st.sampled_from(HARD_TO_ROUND[op]).map(exact.decode)
    values = data.draw(st.lists(st.one_of(ANY_F32, hard), min_size=1,
                                max_size=16), label="values")
    if op in impl.unsupported():
        pytest.skip(f"{op} is unsupported")
    buffers = {0: np.array(values, np.float32)}
    reading, want, got = running.run_both(impl, running.single_op_source(op, len(values)), buffers)
    running.verdict(tally, reading, buffers, want, got, ulps=impl.ulps(op),
            context=f"{op} (declared {impl.ulps(op)} ulps): ")


SAMPLES = 512
# op -> operand count: every elementwise op on f32 that gives an f32 (reference/ops.py).
ELEMENTWISE_F32 = {op: arity for arity in (1, 2) for op in elementwise("f32", arity)}


def sample(count: int, seed: int, hard: tuple[int, ...] = ()) -> np.ndarray:
    """Fixed f32 inputs: the special values and the `hard` bit patterns, then half raw bit
    patterns (every magnitude) and half in [-16, 16] (where programs live). Seeded, so every
    run measures the same inputs."""
    special = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45,
                        1.1754944e-38, 3.4028235e38, -3.4028235e38, 0.1, 3.0], np.float32)
    special = np.concatenate([special, np.array(hard, np.uint32).view(np.float32)])
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, size=(count - len(special)) // 2, dtype=np.uint64)
    near = rng.uniform(-16, 16, size=count - len(special) - len(bits)).astype(np.float32)
    return np.concatenate([special, bits.astype(np.uint32).view(np.float32), near])


@pytest.mark.parametrize("op", sorted(ELEMENTWISE_F32))
def test_forward_error_per_op(impl, tally, op):
    """Every elementwise f32 op on a fixed sample: within the declared ulps (0 unless
    declared), NaN where the reference has NaN. The distances feed the report's ulp chart."""
    if op in impl.unsupported():
        pytest.skip(f"{op} is unsupported")
    arity = ELEMENTWISE_F32[op]
    n = SAMPLES
    lines = [f"%b{k} = buffer slot={k} dtype=f32 shape=[{n}]" for k in range(arity)]
    lines += [f"%o = buffer slot={arity} dtype=f32 shape=[{n}]"]
    lines += [f"%x{k} = load %b{k}" for k in range(arity)]
    lines += [f"%y = {op} " + " ".join(f"%x{k}" for k in range(arity)), "store %o %y"]
    buffers = {k: sample(n, seed=1000 * k + len(op), hard=HARD_TO_ROUND.get(op, ()))
               for k in range(arity)}
    buffers[arity] = np.zeros(n, np.float32)
    reading, want, got = running.run_both(impl, "\n".join(lines) + "\n", buffers)
    if got.status == "ok":
        w = want.buffers[arity].view(np.uint32).tolist()
        g = got.buffers[arity].view(np.uint32).tolist()
        distances = [0 if exact.same_f32(a, b) else exact.ulp_distance(a, b)
                     for a, b in zip(w, g, strict=True)
                     if not (exact.is_nan(a) or exact.is_nan(b))]
        tally.ulps[op] = {"max": max(distances, default=0),
                          "mean": sum(distances) / max(len(distances), 1),
                          "samples": len(distances), "declared": impl.ulps(op)}
    running.verdict(tally, reading, buffers, want, got, ulps=impl.ulps(op),
            context=f"{op} (declared {impl.ulps(op)} ulps): ")
