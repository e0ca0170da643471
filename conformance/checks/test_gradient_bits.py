"""Gradients bit for bit: the walk order, the left fold of shares in arrival order, and the
exact op form of every rule. SPEC.md, "gradient" and "The rules"."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance import running
from gradient_conformance.generators import differentiable_programs
from gradient_conformance.generators.writer import shape_text
from gradient_conformance.reference.ops import TRANSCENDENTAL

RANK = 4  # where the suite runs these checks (plugin.rank): cheaper, more telling first


@given(data=st.data())
def test_gradients_bit_for_bit(impl, tally, data):
    """Generated programs with gradients, bit for bit, for an implementation that claims it."""
    if not impl.capabilities.get("bit_exact_gradients", True):
        pytest.skip("does not claim bit-exact gradients (CAPABILITIES)")
    inexact = any(impl.ulps(op) for op in TRANSCENDENTAL)
    exclude = running.exclusions(impl, transcendental=inexact)
    case = data.draw(differentiable_programs(exclude=exclude))
    running.supported(impl, case, tally)
    running.check_case(impl, tally, case)


@pytest.mark.parametrize("op", ["expand", "reduce-add", "reduce-max"])
def test_rules_over_every_axis_set(impl, tally, op):
    """The rules of expand and reduce over every set of axes of a rank-4 value: each share
    is a reduce or an expand over those axes, whose sums round by their order (SPEC.md,
    "The rules"). y weighs each element apart, so that no two summed shares are equal."""
    if not impl.capabilities.get("bit_exact_gradients", True):
        pytest.skip("does not claim bit-exact gradients (CAPABILITIES)")
    full = running.AXES_SHAPE
    lines = [f"%w = buffer slot=0 dtype=f32 shape={shape_text(full)}", "%wv = load %w"]
    buffers = {0: running.axis_values("f32", seed=7)}
    buffers[0].flat[-1] = 1.5  # no NaN in the weights: it would hide every other share
    slot = 1
    for k, axes in enumerate(running.axis_sets(len(full))):
        small = tuple(1 if d in axes else n for d, n in enumerate(full))
        shape = small if op == "expand" else full
        values = running.axis_values("f32", seed=slot)
        values.flat[-1] = 0.25
        lines += [f"%i{k} = buffer slot={slot} dtype=f32 shape={shape_text(shape)}",
                  f"%o{k} = buffer slot={slot + 1} dtype=f32 shape={shape_text(shape)}",
                  f"%x{k} = load %i{k}"]
        if op == "expand":
            lines.append(f"%v{k} = expand %x{k} shape={shape_text(full)}")
            weights, wide = "%wv", f"%v{k}"
        else:
            reduce_op = op.split("-")[1]
            attrs = f"op={reduce_op} axis={shape_text(axes)}"
            lines += [f"%v{k} = reduce %x{k} {attrs}", f"%u{k} = reduce %wv {attrs}"]
            weights, wide = f"%u{k}", f"%v{k}"
        lines += [f"%m{k} = mul {wide} {weights}", f"%y{k} = reduce %m{k} op=add",
                  f"%g{k} = gradient %y{k} %x{k}", f"store %o{k} %g{k}"]
        buffers[slot] = values[tuple(slice(0, n) for n in shape)].copy()
        buffers[slot + 1] = np.zeros(shape, np.float32)
        slot += 2
    reading, want, got = running.run_both(impl, "\n".join(lines) + "\n", buffers)
    running.verdict(tally, reading, buffers, want, got, context=f"the {op} rule: ")
