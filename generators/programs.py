"""Whole valid programs: `programs`, `exact_programs` and `differentiable_programs`, each
drawing a `Case` written step by step (steps.py). docs/generators.md, "Generators".

Every strategy takes keyword-only bounds (bounds.py, validated as Hypothesis validates its
own), and says in its docstring what it shrinks towards.
"""

from __future__ import annotations

import dataclasses
import functools
from contextvars import ContextVar

from hypothesis import assume
from hypothesis import strategies as st

from gradient_conformance.generators import choices
from gradient_conformance.generators.bounds import Bounds
from gradient_conformance.generators.buffers import ELEMENT_BYTES, fill, smooth_f32
from gradient_conformance.generators.case import Case
from gradient_conformance.generators.steps import (
    MAX_SINKS,
    STEP_SETS,
    _gradient,
    _higher_order,
    _restated_gradient,
)
from gradient_conformance.generators.writer import EMPTY_ONE_IN, SHAPES, SWARM, Writer
from gradient_conformance.reference.ops import (
    DTYPES,
    TRANSCENDENTAL,
    features_of_statements,
)

# --- whole programs ---------------------------------------------------------------------------


# The writer of the program being drawn. A step strategy takes only plain values (a step
# set's name, a shape, a flag), never the writer or functions: their reprs hold memory
# addresses, and a strategy's arguments must be the same in every process for derandomized
# runs to repeat. Being plain values, they also let each step's strategy be made once
# (functools.cache), as choices.py says why.
_WRITER: ContextVar[Writer] = ContextVar("writer")


@functools.cache
@st.composite
def _step(draw, step_set: str, base, forced: bool) -> bool:
    """One step, or the end of the program (False). Its choices, the continue flag included,
    form one span of Hypothesis's choices, so the shrinker can delete a whole step."""
    w = _WRITER.get()
    outer, w.stream.draw = w.stream.draw, draw
    try:
        if not forced and w.integer(0, 5) == 0:
            return False
        w.choose(STEP_SETS[step_set])(w, base)
    finally:
        w.stream.draw = outer
    return True


def _base(w: Writer, shapes) -> tuple[int, ...]:
    """The program's base shape: an empty one (a 0-length dim) in one program of
    EMPTY_ONE_IN when `shapes` holds both kinds, else one of the others; shrinks towards the
    first shape that is not empty."""
    empty = [s for s in shapes if 0 in s]
    full = [s for s in shapes if 0 not in s]
    if empty and full:
        return w.choose(empty) if w.fairly(range(EMPTY_ONE_IN)) == EMPTY_ONE_IN - 1 else \
            w.choose(full)
    return w.choose(shapes)


def _write(draw, *, steps, min_steps, max_steps, exclude, min_gradients, store_values,
           reached_only: bool = False, inputs: int = 0, shapes=SHAPES,
           dtypes=("f32", "i32", "bool")) -> Writer:
    assert "f32" in dtypes, "every program computes in f32"
    w = Writer(draw, exclude=frozenset(exclude))
    base = _base(w, shapes)
    w.base = base
    w.swarm = frozenset(feature for feature in SWARM if w.flip())
    # Differentiable programs compute in f32; bools are their conditions.
    w.dtypes = ("f32", "bool") if reached_only else tuple(dtypes)
    w.smooth = reached_only
    for _ in range(inputs):
        w.input("f32", base)
    token = _WRITER.set(w)
    try:
        # A step that finds nothing to write on (a gradient with no f32 value yet) is not
        # one of the min_steps: a program of none is no case.
        taken = 0
        for _ in range(max_steps):
            before = len(w.body)
            if not draw(_step(steps, base, taken < min_steps)):
                break
            taken += len(w.body) > before
    finally:
        _WRITER.reset(token)
    wanted = min_gradients + (w.integer(0, 1) if min_gradients else 0)
    for _ in range(4 * max(wanted, 1)):
        if w.gradients >= wanted:
            break
        if not any(v.dtype == "f32" and not v.literal for v in w.pool):
            w.input("f32", base)
        _gradient(w, base, reached_only=reached_only)
    if w.gradients and "gradient" not in w.exclude and w.integer(0, 3) == 3:
        _restated_gradient(w)
    if reached_only and w.gradients and w.flip():
        _higher_order(w, base)
    stored = [v for v in w.pool if v.text.startswith("%g")]
    if store_values or not stored:
        stored += [v for v in w.sinks() if v not in stored][:MAX_SINKS]
    for v in stored:
        w.store(v)
    return w


def _case(draw, w: Writer, *, mode: str, kind: str, expect_error=None, how: str = "",
          f32_values=None) -> Case:
    """The case the writer wrote, from one parse of its program: its buffers, its kink
    distance (in smooth mode), its features and its description all read those statements."""
    source, statements = w.program()
    filled = fill(draw, statements, mode=mode, f32_values=f32_values)
    features = features_of_statements(statements)
    return Case(source, filled.buffers, expect_error,
                how or _describe(kind, statements, features), filled.kink_distance, features,
                tuple(statements), filled.built)


def programs(*, min_steps: int = 1, max_steps: int = 12, exclude=frozenset(),
             shapes=SHAPES, dtypes=DTYPES, inputs: str = "anything") -> st.SearchStrategy[Case]:
    """Valid programs that mix every op of the IR: f32, i32 and bool; shapes from scalars to
    rank 3; shared literals; loads and stores with and without indices; ranges (nested);
    def/call; detach; several gradients; gradients of gradients. `exclude` names ops (or
    `higher_order`) never to use; `shapes` are the base shapes to draw from (reductions make
    others); `dtypes` the dtypes values may have (f32 always; range counters and indices are
    i32 regardless). Shrinks towards fewer steps, the simplest kinds of step (f32 mul
    first), the first shape, and the earliest values."""
    return _programs(Bounds(min_steps=min_steps, max_steps=max_steps, exclude=exclude,
                            shapes=shapes, dtypes=dtypes, inputs=inputs))


def exact_programs(*, min_steps: int = 1, max_steps: int = 12, exclude=frozenset(),
                   shapes=SHAPES, dtypes=DTYPES, inputs: str = "anything"
                   ) -> st.SearchStrategy[Case]:
    """programs() without exp2, log2 and sin: what an implementation that rounds only the IEEE
    basic operations correctly must still get right bit for bit. Shrinks as programs()."""
    bounds = Bounds(min_steps=min_steps, max_steps=max_steps, exclude=exclude, shapes=shapes,
                    dtypes=dtypes, inputs=inputs)
    return _programs(dataclasses.replace(bounds, exclude=bounds.exclude | TRANSCENDENTAL))


@st.composite
def _programs(draw, bounds: Bounds) -> Case:
    return _program(draw, bounds)


def _program(draw, b: Bounds) -> Case:
    """A programs() case, drawn with the caller's draw: a strategy drawn from inside another
    would be made, and validated, anew for every case (choices.py)."""
    w = _write(draw, steps="program", min_steps=b.min_steps, max_steps=b.max_steps,
               exclude=b.exclude, min_gradients=0, store_values=True, shapes=b.shapes,
               dtypes=b.dtypes)
    return _case(draw, w, mode=b.inputs, kind="program")


def _smooth_values(s: choices.Stream) -> list[float]:
    """Two to six distinct smooth f32 values: a differentiable program's inputs, drawn
    before it (see below)."""
    values: list[float] = []
    for _ in range(s.integer(2, 6)):
        value = smooth_f32(s)
        if value not in values:
            values.append(value)
    return values


def differentiable_programs(*, min_steps: int = 1, max_steps: int = 10,
                            min_gradients: int = 1, exclude=frozenset(), shapes=SHAPES,
                            inputs: str = "smooth", store_values: bool | None = None
                            ) -> st.SearchStrategy[Case]:
    """A scalar f32 loss and one or more gradients against loads or intermediate nodes, in
    DAGs where values are reused (beside their own detach too), with inputs kept away from
    kinks (the distance is on the case). Shrinks towards a single gradient of few steps, a
    scalar x, and storing only the gradient."""
    return _differentiable_programs(Bounds(
        min_steps=min_steps, max_steps=max_steps, min_gradients=min_gradients,
        exclude=exclude, shapes=shapes, inputs=inputs, store_values=store_values))


@st.composite
def _differentiable_programs(draw, b: Bounds) -> Case:
    # The input values come first, so that they stay put while the program shrinks.
    first = choices.Stream(draw, 1 + 6 * ELEMENT_BYTES + 1)
    values = _smooth_values(first) if b.inputs == "smooth" else None
    keep = first.flip() if b.store_values is None else b.store_values
    w = _write(draw, steps="differentiable", min_steps=b.min_steps, max_steps=b.max_steps,
               exclude=b.exclude, min_gradients=b.min_gradients, store_values=keep,
               reached_only=True, inputs=1, shapes=b.shapes)
    assume(w.gradients >= b.min_gradients)
    return _case(draw, w, mode=b.inputs, kind="differentiable program", f32_values=values)


def _describe(kind: str, statements, features) -> str:
    gradients = sum(1 for s in statements if s.op == "gradient")
    return f"{kind}: {len(statements)} statements, {gradients} gradients; uses " + \
        " ".join(sorted(features))
