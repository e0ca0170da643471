"""The IR's shapes lowered onto flat arrays, for a system that has no tensors: only
elementwise ops and a gather. docs/adapters.md, "Adapters"; the kit's docstring.

The index maps of expand, reduce, reshape, loads and stores are written here once, as numpy
arrays of flat indices, row-major as the IR lays out its values. The system is handed them as
its own i32 arrays; every number it computes is its own, and so is every derivative (a
gather's derivative, a scatter-add, is the system's, as its tape or its compiler makes it).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from gradient_conformance.reference.interp import NUMPY_DTYPES as NUMPY
from gradient_conformance.reference.ops import OPS

# The op a flat system gives beyond the IR's elementwise ones.
GATHER = "gather"
# An empty reduction's value (ir.md, "reduce").
IDENTITY = {"add": {"f32": 0.0, "i32": 0}, "max": {"f32": -np.inf, "i32": -(2**31)},
            "mul": {"f32": 1.0, "i32": 1}}


@dataclasses.dataclass(frozen=True)
class Flat:
    """A value as the kit holds it for a flat system: the system's array of `size` elements,
    and the IR dtype and shape it stands for."""

    array: object
    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def result_dtype(name: str, values: list[Flat], attrs: dict) -> str:
    """The dtype of op `name` on these operands, from the IR's table (reference/ops.py)."""
    if name in ("cast", "bitcast"):
        return attrs["dtype"]
    if name == "where":
        return values[1].dtype
    return OPS[name].result or values[0].dtype


def expand_map(shape: tuple[int, ...], to: tuple[int, ...]) -> np.ndarray:
    """For each element of the expanded value, the element of the operand it copies."""
    return np.broadcast_to(np.arange(math.prod(shape)).reshape(shape), to).reshape(-1)


def reduce_groups(shape: tuple[int, ...], axes: tuple[int, ...]) -> np.ndarray:
    """A matrix whose row r lists, in row-major order, the operand's elements that output
    element r folds."""
    index = np.arange(math.prod(shape)).reshape(shape)
    kept = [d for d in range(len(shape)) if d not in axes]
    return np.transpose(index, kept + list(axes)).reshape(
        math.prod(shape[d] for d in kept), math.prod(shape[d] for d in axes))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool):
    return tuple(1 if d in axes else n for d, n in enumerate(shape)) if keepdims else \
        tuple(n for d, n in enumerate(shape) if d not in axes)


class Lowering:
    """The IR's ops on `Flat` values of `system`, which gives `ops` (each called with its
    operands' arrays and keywords `dtype`, its dtype object, and `shape`, the IR shape of its
    result), `dtypes` and `tensor(array)` for a flat numpy array."""

    def __init__(self, system):
        self.system = system

    def call(self, name: str, arrays: list, dtype: str, shape: tuple[int, ...]) -> Flat:
        s = self.system
        if name not in s.ops:
            raise NotImplementedError(f"{s.name} has no {name} in its adapter's table")
        return Flat(s.ops[name](*arrays, dtype=s.dtypes[dtype], shape=shape), dtype, shape)

    def constant(self, array: np.ndarray, dtype: str, shape: tuple[int, ...] = ()) -> Flat:
        return Flat(self.system.tensor(np.ascontiguousarray(array).reshape(-1)), dtype, shape)

    def gather(self, a: Flat, index: np.ndarray, shape: tuple[int, ...]) -> Flat:
        """out[i] = a[index[i]]: expand, loads, and spreading a scalar."""
        where = self.constant(np.asarray(index, np.int32), "i32", shape)
        return self.call(GATHER, [a.array, where.array], a.dtype, shape)

    def spread(self, a: Flat, shape: tuple[int, ...]) -> Flat:
        """A scalar (a literal, a 0-d value) as a value of `shape`, so that every operand a
        system's elementwise op sees has the result's size."""
        if a.shape == shape:
            return a
        return self.gather(a, np.zeros(math.prod(shape), np.int32), shape)

    def op(self, name: str, values: list[Flat], attrs: dict) -> Flat:
        if name == "reduce":
            return self.reduce(values[0], attrs["op"], attrs["axes"], attrs["keepdims"])
        if name == "expand":
            return self.gather(values[0], expand_map(values[0].shape, attrs["shape"]),
                               attrs["shape"])
        if name == "reshape":  # row-major: the same elements in the same order
            return dataclasses.replace(values[0], shape=attrs["shape"])
        shape = max((v.shape for v in values), key=len)  # the others' or a literal's ()
        arrays = [self.spread(v, shape).array for v in values]
        return self.call(name, arrays, result_dtype(name, values, attrs), shape)

    def reduce(self, a: Flat, op: str, axes: tuple[int, ...], keepdims: bool) -> Flat:
        """A left fold, in row-major order of each group, one gathered element of every
        group at a time (ir.md); an empty group gives the op's identity. Not a scatter-add:
        that sums in an order of the system's and starts from +0.0, so the sum of -0.0s
        would be +0.0 where the system's own add gives -0.0."""
        groups = reduce_groups(a.shape, axes)
        shape = reduced_shape(a.shape, axes, keepdims)
        if groups.shape[1] == 0:
            identity = IDENTITY[op][a.dtype]
            return self.spread(self.constant(np.array([identity], NUMPY[a.dtype]), a.dtype),
                               shape)
        acc = self.gather(a, groups[:, 0], shape)
        for k in range(1, groups.shape[1]):
            acc = self.call(op, [acc.array, self.gather(a, groups[:, k], shape).array],
                            a.dtype, shape)
        return acc

    def element(self, a: Flat, index: int) -> Flat:
        return self.gather(a, np.array([index]), ())

    def with_element(self, a: Flat, index: int, e: Flat) -> Flat:
        """a with element `index` replaced by e, out of place: a where over a mask."""
        mask = np.zeros(a.size, np.bool_)
        mask[index] = True
        return self.call("where", [self.constant(mask, "bool", a.shape).array,
                                   self.spread(e, a.shape).array, a.array], a.dtype, a.shape)

    def broadcast(self, e: Flat, shape: tuple[int, ...], dtype: str) -> Flat:
        if e.dtype != dtype:
            e = self.call("cast", [e.array], dtype, e.shape)
        return self.spread(e, tuple(shape))
