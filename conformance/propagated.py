"""What an implementation's declared ulps allow in what is computed from an op's results
(issue 53). docs/suite.md, "What a pass compared".

An implementation that declares N ulps for exp2, log2 or sin claims its results of that op
within N ulps of the correctly rounded ones; it claims nothing of the values computed from
them, and they may be further off (a gradient of sin, g * sin(a + pi/2), 2 ulps off where
sin's result is 1). So a slot computed from such results is compared within the bound those
results propagate: the spec's outcome with every result of each declared op moved down by
its N ulps, and with every one moved up, each run through the rest of the program
correctly rounded as the spec runs it. The implementation's value must lie between the
lowest and the highest of the spec's and those two (a NaN where one of them is NaN).

A correctly rounded add, mul, max or reduce is monotone in each operand, so where each
value depends on the moved results through such ops (a rule's gradient: g * sin(a + pi/2))
the values any results within the ulps give lie between those two runs. **Decision:** the
bracket is the bound also where a value is not monotone in them (a product of a result with
itself across zero, where the ulps around a result of 0 are subnormals whose square is 0).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.reference import exact
from gradient_conformance.reference.ops import TRANSCENDENTAL
from gradient_conformance.reference.semantics import SPEC, Semantics


def moved(bits: int, steps: int) -> int:
    """The f32 `steps` values above `bits` in value order (below, for a negative `steps`),
    -0.0 and +0.0 one point and the infinities the ends; a NaN stays."""
    if exact.is_nan(bits):
        return bits
    ordinal = -(bits & 0x7FFFFFFF) if bits & 0x80000000 else bits
    ordinal = max(-0x7F800000, min(0x7F800000, ordinal + steps))
    return (-ordinal) | 0x80000000 if ordinal < 0 else ordinal


def shifted(ulps: dict[str, int], direction: int, base: Semantics = SPEC) -> Semantics:
    """The spec, with every result of each op in `ulps` moved by its ulps, up (`direction`
    1) or down (-1)."""
    domain = base.domain
    body = {}
    for op, n in ulps.items():
        function = getattr(domain, op)
        body[op] = staticmethod(lambda *a, f=function, k=n * direction: moved(f(*a), k))
    kind = type(f"{type(domain).__name__}_moved", (type(domain),), body)
    return dataclasses.replace(base, domain=kind())


def bracket(reading, buffers, ulps: dict[str, int], build_only: bool = False) \
        -> tuple[Outcome, Outcome] | None:
    """The spec's outcome with the declared ops' results moved down, and up (`shifted`);
    None where either run does not give the spec's status."""
    declared = {op: n for op, n in ulps.items() if op in TRANSCENDENTAL and n > 0}
    if not declared:
        return None
    try:
        low = reading.outcome(buffers, shifted(declared, -1), build_only=build_only)
        high = reading.outcome(buffers, shifted(declared, 1), build_only=build_only)
    except Exception:  # noqa: BLE001 - a run the moved results stop: no bracket, said
        return None
    if low.status != "ok" or high.status != "ok":
        return None
    return low, high


def outside(want: np.ndarray, low: np.ndarray, high: np.ndarray,
            got: np.ndarray) -> list[int]:
    """The flat indices where `got` (f32) lies outside the values from the lowest to the
    highest of `want`, `low` and `high`; where one of those is NaN, a NaN is within."""
    runs = np.stack([want.ravel(), low.ravel(), high.ravel()]).astype(np.float64)
    mine = got.ravel().astype(np.float64)
    nans = np.isnan(runs)
    lo = np.where(nans, np.inf, runs).min(axis=0)  # over the runs that are numbers
    hi = np.where(nans, -np.inf, runs).max(axis=0)
    with np.errstate(invalid="ignore"):
        within = (mine >= lo) & (mine <= hi)
    nan = nans.any(axis=0)
    within |= nan & np.isnan(mine)
    # A value equal to one of the three runs, bits and all (-0.0 beside +0.0), is within.
    for run in (want, low, high):
        within |= run.ravel().view(np.uint32) == got.ravel().view(np.uint32)
    return np.flatnonzero(~within).tolist()
