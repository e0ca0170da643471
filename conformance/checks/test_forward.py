"""Forward results: bit for bit against the reference, and exp2/log2/sin within the ulps an
implementation declares. SPEC.md, "Values and arithmetic"."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance import casefiles, running
from gradient_conformance.generators import exact_programs, programs
from gradient_conformance.generators.buffers import ANY_F32
from gradient_conformance.generators.hard_to_round import HARD_TO_ROUND
from gradient_conformance.generators.writer import shape_text
from gradient_conformance.reference import exact
from gradient_conformance.reference.cases import NUMPY
from gradient_conformance.reference.ops import REDUCE_OPS, TRANSCENDENTAL, elementwise, feature

RANK = 1  # where the suite runs these checks (plugin.rank): cheaper, more telling first


@given(data=st.data())
def test_exact_programs_bit_for_bit(impl, tally, data):
    """Generated programs without exp2, log2 and sin, their values bit for bit."""
    case = data.draw(exact_programs(exclude=running.exclusions(impl, bits=True)))
    running.supported(impl, case, tally)
    running.check_case(impl, tally, case)


@given(data=st.data())
def test_programs_with_transcendentals(impl, tally, data):
    """Bit for bit for an implementation that claims correct rounding everywhere."""
    if any(impl.ulps(op) for op in TRANSCENDENTAL):
        pytest.skip("declares ulps for exp2/log2/sin: compared op by op instead")
    case = data.draw(programs(exclude=running.exclusions(impl, bits=True)))
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
    tally.case({op})
    buffers = {0: np.array(values, np.float32)}
    reading, want, got = running.run_both(impl, casefiles.single_op_source(op, len(values)),
                                          buffers, tally=tally)
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


# Literal operands beside the sampled values: where implementations fold or special-case by
# value (add a 0.0, max a 0.0 as relu, mul a 1.0), and the values IEEE treats apart.
OPERAND_LITERALS = ("0.0", "-0.0", "1.0", "-1.0", "0.5", "inf", "-inf", "nan", "1e-45")


def forward_program(op: str, arity: int, n: int) -> tuple[str, list[tuple[int, tuple]]]:
    """`op` over the sampled values (slot `arity`), and, as conditions of the op (reference/
    conditions.py), with each literal operand on either side, of each literal alone, and
    with the same value twice; with the output slots and their shapes."""
    lines = [f"%b{k} = buffer slot={k} dtype=f32 shape=[{n}]" for k in range(arity)]
    lines += [f"%x{k} = load %b{k}" for k in range(arity)]
    outputs = [" ".join(f"%x{k}" for k in range(arity))]
    shapes: list[tuple] = [(n,)]
    for literal in OPERAND_LITERALS:
        if arity == 2:
            outputs += [f"%x0 {literal}", f"{literal} %x0"]
            shapes += [(n,), (n,)]
        else:
            outputs.append(literal)
            shapes.append(())
    if arity == 2:
        outputs.append("%x0 %x0")
        shapes.append((n,))
    slots = []
    for k, (operands, shape) in enumerate(zip(outputs, shapes, strict=True)):
        slot = arity + k
        lines.insert(arity + k, f"%o{k} = buffer slot={slot} dtype=f32 shape="
                     f"{shape_text(shape)}")
        lines += [f"%y{k} = {op} {operands}", f"store %o{k} %y{k}"]
        slots.append((slot, shape))
    return "\n".join(lines) + "\n", slots


@pytest.mark.parametrize("op", sorted(ELEMENTWISE_F32))
def test_forward_error_per_op(impl, tally, op):
    """Every elementwise f32 op on a fixed sample, beside literal operands of the values IEEE
    treats apart and the same value twice: within the declared ulps (0 unless declared), NaN
    where the reference has NaN. The distances over the sample feed the report's ulp chart."""
    if op in impl.unsupported():
        pytest.skip(f"{op} is unsupported")
    arity = ELEMENTWISE_F32[op]
    n = SAMPLES
    source, slots = forward_program(op, arity, n)
    buffers = {k: sample(n, seed=1000 * k + len(op), hard=HARD_TO_ROUND.get(op, ()))
               for k in range(arity)}
    buffers.update({slot: np.zeros(shape, np.float32) for slot, shape in slots})
    reading, want, got = running.run_both(impl, source, buffers)
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


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_over_every_axis_set(impl, tally, op):
    """reduce op=OP of f32 and i32 over every set of axes of a rank-4 value (none, one, a
    middle one, several, a size-1 one) and over all of it: each is another index map, and
    each row is folded left in row-major order (SPEC.md, "Values and arithmetic")."""
    if feature("reduce", op) in impl.unsupported():
        pytest.skip(f"reduce op={op} is unsupported")
    dims = shape_text(running.AXES_SHAPE)
    lines, buffers = [], {}
    for slot, dtype in enumerate(("f32", "i32")):
        lines += [f"%b{dtype} = buffer slot={slot} dtype={dtype} shape={dims}",
                  f"%x{dtype} = load %b{dtype}"]
        buffers[slot] = running.axis_values(dtype, seed=slot + len(op))
    slot = 2
    for dtype in ("f32", "i32"):
        for axes in [None, *running.axis_sets(len(running.AXES_SHAPE))]:
            shape = () if axes is None else tuple(
                1 if d in axes else n for d, n in enumerate(running.AXES_SHAPE))
            attrs = f"op={op}" + ("" if axes is None else f" axis={shape_text(axes)}")
            lines += [f"%o{slot} = buffer slot={slot} dtype={dtype} shape={shape_text(shape)}",
                      f"%r{slot} = reduce %x{dtype} {attrs}", f"store %o{slot} %r{slot}"]
            buffers[slot] = np.zeros(shape, NUMPY[dtype])
            slot += 1
    source = "\n".join(lines) + "\n"
    reading, want, got = running.run_both(impl, source, buffers)
    running.verdict(tally, reading, buffers, want, got, context=f"reduce op={op}: ")


def test_expand_over_every_axis_set(impl, tally):
    """expand to a rank-4 shape from every shape with some of its axes of size 1 (one, a
    middle one, several, all) and from a scalar, of f32 and i32 (SPEC.md, "Operations")."""
    dims = shape_text(running.AXES_SHAPE)
    lines, buffers, slot = [], {}, 0
    for dtype in ("f32", "i32"):
        for axes in running.axis_sets(len(running.AXES_SHAPE)):
            source_shape = tuple(1 if d in axes else n for d, n in enumerate(running.AXES_SHAPE))
            lines += [f"%i{slot} = buffer slot={slot} dtype={dtype} "
                      f"shape={shape_text(source_shape)}",
                      f"%o{slot} = buffer slot={slot + 1} dtype={dtype} shape={dims}",
                      f"%x{slot} = load %i{slot}", f"%e{slot} = expand %x{slot} shape={dims}",
                      f"store %o{slot} %e{slot}"]
            values = running.axis_values(dtype, seed=slot)
            buffers[slot] = values[tuple(slice(0, n) for n in source_shape)].copy()
            buffers[slot + 1] = np.zeros(running.AXES_SHAPE, NUMPY[dtype])
            slot += 2
    reading, want, got = running.run_both(impl, "\n".join(lines) + "\n", buffers)
    running.verdict(tally, reading, buffers, want, got, context="expand: ")
