"""Random differentiable programs for the oracle's own cross-checks.

A small strategy kept with the tests: generators/ (issue 3) grows the product's strategies;
this one only has to reach every gradient rule, in DAGs where nodes are reused, so that the
rules can be checked against finite differences and forward mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

SHAPES = [(), (3,), (2, 2), (1, 3)]


@dataclass
class SmoothProgram:
    source: str
    shape: tuple[int, ...]
    # slots: 0 x, 1 w (both inputs), 2 y (the loss), 3 dy/dx, 4 d2y/dx2 (scalar x only)


def _fmt(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


@st.composite
def smooth_programs(draw, *, max_steps: int = 8, second_order: bool = False) -> SmoothProgram:
    """A loss y built from x and w by `max_steps` random steps that reuse earlier values
    (a DAG), with `%g = gradient %y %x`. Shrinks towards fewer steps and the first kinds."""
    shape = () if second_order else draw(st.sampled_from(SHAPES))
    s = _fmt(shape)
    lines = [f"%xin = buffer slot=0 dtype=f32 shape={s}",
             f"%win = buffer slot=1 dtype=f32 shape={s}",
             "%yout = buffer slot=2 dtype=f32 shape=[]",
             f"%gout = buffer slot=3 dtype=f32 shape={s}",
             "%hout = buffer slot=4 dtype=f32 shape=[]",
             "%x = load %xin", "%w = load %win"]
    pool = ["%x", "%w"]
    steps = draw(st.integers(1, max_steps))
    for k in range(steps):
        a = draw(st.sampled_from(pool))
        b = draw(st.sampled_from(pool))
        v = f"%v{k}"
        kind = draw(st.sampled_from(KINDS))
        lines += [line.format(v=v, a=a, b=b, s=s, flat=f"[{max(1, _size(shape))}]",
                              axis0="[0]") for line in _step(kind, shape)]
        pool.append(v)
    last = pool[-1]
    loss = draw(st.sampled_from(["add", "max"])) if shape else "none"
    if loss == "none":
        lines.append(f"%y = add {last} 0.0")
    else:
        lines.append(f"%y = reduce {last} op={loss}")
    lines += ["%g = gradient %y %x", "store %yout %y", "store %gout %g"]
    if second_order:
        lines += ["%h = gradient %g %x", "store %hout %h"]
    return SmoothProgram("\n".join(lines) + "\n", shape)


def _size(shape) -> int:
    size = 1
    for d in shape:
        size *= d
    return size


# Each kind is a few lines defining {v} from {a} and {b}; every rule of the table appears.
# Arguments of recip, log2 and sqrt are kept positive by construction (a*a + 0.5).
_KINDS = {
    "add": ["{v} = add {a} {b}"],
    "mul": ["{v} = mul {a} {b}"],
    "mul_literal": ["{v} = mul {a} -1.5"],
    "max": ["{v} = max {a} {b}"],
    "where": ["{v}.c = cmplt {a} {b}", "{v} = where {v}.c {a} {b}"],
    "recip": ["{v}.p = mul {a} {a}", "{v}.q = add {v}.p 0.5", "{v} = recip {v}.q"],
    "log2": ["{v}.p = mul {a} {a}", "{v}.q = add {v}.p 0.5", "{v} = log2 {v}.q"],
    "sqrt": ["{v}.p = mul {a} {a}", "{v}.q = add {v}.p 0.5", "{v} = sqrt {v}.q"],
    "exp2": ["{v}.s = sin {a}", "{v} = exp2 {v}.s"],
    "sin": ["{v} = sin {a}"],
    "detach": ["{v}.d = detach {a}", "{v} = mul {b} {v}.d"],
    "cast": ["{v} = cast {a} dtype=f32"],
    "bitcast": ["{v} = bitcast {a} dtype=f32"],
    "dead_end": ["{v}.i = cast {a} dtype=i32", "{v}.f = cast {v}.i dtype=f32",
                 "{v} = add {v}.f {b}"],
    "reshape": ["{v}.r = reshape {a} shape={flat}", "{v} = reshape {v}.r shape={s}"],
    "reduce_add": ["{v}.r = reduce {a} op=add", "{v} = expand {v}.r shape={s}"],
    "reduce_max": ["{v}.r = reduce {a} op=max", "{v} = expand {v}.r shape={s}"],
    "reduce_axis": ["{v}.r = reduce {a} op=add axis={axis0}", "{v} = expand {v}.r shape={s}"],
    "reduce_max_axis": ["{v}.r = reduce {a} op=max axis={axis0}", "{v} = expand {v}.r shape={s}"],
}
KINDS = list(_KINDS)


def _step(kind: str, shape) -> list[str]:
    if kind in ("reduce_axis", "reduce_max_axis") and not shape:
        kind = "reduce_add"  # a scalar has no axis 0
    return _KINDS[kind]
