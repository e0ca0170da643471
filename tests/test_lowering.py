"""The kit's lowering onto flat arrays (adapters/lowering.py), on a kernel-style system written
for the test (tests/impls/flat_kernels.py: flat numpy arrays, elementwise ops and a gather,
HIPS autograd's derivatives). docs/adapters.md, "Adapters".

The same arithmetic as the autograd adapter, on tensors there and lowered here, must give the
same bits wherever autograd's tensor ops are not themselves the difference; and the system
must only ever see flat arrays of its result's size, told the result's dtype and shape.
"""

from __future__ import annotations

import itertools
import math
from typing import ClassVar

import numpy as np
import pytest

from gradient_conformance.adapters import autograd_impl
from gradient_conformance.adapters.lowering import (
    expand_map,
    reduce_groups,
    reduced_shape,
)
from gradient_conformance.reference.cases import (
    buffer_slots,
    case_paths,
    check,
    initial_buffers,
    load_case,
    same_bits,
)
from tests.conftest import ROOT
from tests.impls import flat_kernels

SHAPES = [(), (1,), (3,), (2, 3), (3, 1), (2, 1, 4), (2, 3, 2)]

# Where the two differ, and why. A reduce max lowered is a fold of the system's binary max,
# so a tie's share is split by that op's derivative at each step, not by the reduce's own.
DIFFER = {
    # autograd's broadcast_to derivative: "Can't handle extra leading dims"; a gather has none.
    "gradient/expand_rule.ir": "rejected by the tensor adapter only",
    "gradient/reduce_max_ties.ir": "a tie split by binary max",
    "gradient/weighted_reduce_max.ir": "a tie split by binary max",
    # numpy's max of nothing raises; the fold gives the identity, as the case file says.
    "ops/reduce_empty_identity.ir": "rejected by the tensor adapter only",
    # numpy's sum of a row of 16 is pairwise, from +0.0; lowered, a left fold, as the spec's.
    "ops/reduce_long_row.ir": "numpy's pairwise sum in the tensor adapter",
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_expand_map_is_numpy_s_broadcast(shape):
    values = np.arange(math.prod(shape)).reshape(shape) * 10
    for to in {tuple(n if n != 1 else 4 for n in shape), shape}:
        assert np.array_equal(values.reshape(-1)[expand_map(shape, to)],
                              np.broadcast_to(values, to).reshape(-1))


@pytest.mark.parametrize("shape", [s for s in SHAPES if s], ids=str)
def test_reduce_groups_fold_in_row_major_order(shape):
    """Each output element's group lists its operand's elements in row-major order of the
    reduced axes (ir.md: reduce folds left in that order), and the groups are the outputs'
    elements in row-major order."""
    values = np.arange(math.prod(shape)).reshape(shape)
    for count in range(1, len(shape) + 1):
        for axes in itertools.combinations(range(len(shape)), count):
            groups = reduce_groups(shape, axes)
            want = np.moveaxis(values, axes, range(-count, 0)).reshape(groups.shape)
            assert np.array_equal(values.reshape(-1)[groups], want)
            assert groups.shape[0] == math.prod(reduced_shape(shape, axes, True))


def cases():
    return [p for p in case_paths([ROOT / "cases"]) if load_case(p).error is None]


@pytest.mark.parametrize("path", cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lowered_runs_give_the_tensor_adapter_s_bits(path):
    case = load_case(path)
    name = f"{path.parent.name}/{path.name}"
    buffers = initial_buffers(case, buffer_slots(case.source))

    def outcome(module):
        try:
            return module.build(case.source)({s: a.copy() for s, a in buffers.items()})
        except Exception as problem:  # noqa: BLE001 - a rejection, compared by its kind
            return type(problem).__name__

    flat_kernels.SEEN.clear()
    lowered, tensor = outcome(flat_kernels), outcome(autograd_impl)
    assert not isinstance(lowered, str) or "AssertionError" != lowered, "a kernel's check failed"
    if name in DIFFER:  # still different, or the entry goes
        assert isinstance(tensor, str) != isinstance(lowered, str) or any(
            not same_bits(want, lowered[slot]) for slot, want in tensor.items())
        if isinstance(tensor, str):
            assert check(case, flat_kernels.build) == (True, "ok")
        return
    if isinstance(tensor, str) or isinstance(lowered, str):
        assert tensor == lowered
        return
    for slot, want in tensor.items():
        assert same_bits(want, lowered[slot]), f"slot {slot}: {want} != {lowered[slot]}"


def test_every_op_is_told_its_result_s_dtype_and_shape():
    run = flat_kernels.build("""%a = buffer slot=0 dtype=f32 shape=[2,3]
%o = buffer slot=1 dtype=i32 shape=[2,1]
%x = load %a
%c = cast %x dtype=i32
%r = reduce %c op=max axis=1
store %o %r
""")
    flat_kernels.SEEN.clear()
    run({0: np.arange(6, dtype=np.float32).reshape(2, 3), 1: np.zeros((2, 1), np.int32)})
    assert ("cast", "int32", (2, 3)) in flat_kernels.SEEN
    assert ("max", "int32", (2, 1)) in flat_kernels.SEEN
    assert {op for op, _, _ in flat_kernels.SEEN} == {"cast", "gather", "max"}


def test_an_empty_reduction_is_the_identity_and_a_sum_of_negative_zeros_is_negative():
    """The fold starts from the first element, as ir.md says, so -0.0 + -0.0 stays -0.0 (a
    scatter-add into zeros gives +0.0), and an empty group is the op's identity."""
    run = flat_kernels.build("""%a = buffer slot=0 dtype=f32 shape=[2,0]
%b = buffer slot=1 dtype=f32 shape=[3]
%o = buffer slot=2 dtype=f32 shape=[2,1]
%p = buffer slot=3 dtype=f32 shape=[]
%x = load %a
%m = reduce %x op=max axis=1
store %o %m
%y = load %b
%s = reduce %y op=add
store %p %s
""")
    out = run({0: np.zeros((2, 0), np.float32), 1: np.full(3, -0.0, np.float32),
               2: np.zeros((2, 1), np.float32), 3: np.zeros((), np.float32)})
    assert out[2].tolist() == [[-np.inf], [-np.inf]]
    assert np.signbit(out[3])


def test_a_flat_system_without_a_gather_is_a_crash_saying_so():
    """The adapter's omission, not the system's answer (tests/test_kit.py says why)."""
    class NoGather(flat_kernels.FlatKernels):
        ops: ClassVar[dict] = {k: v for k, v in flat_kernels.OPS.items() if k != "gather"}

    with pytest.raises(NotImplementedError, match="flat-kernels has no gather"):
        NoGather().build("""%a = buffer slot=0 dtype=f32 shape=[2]
%x = load %a
%e = load %a 1
""")
