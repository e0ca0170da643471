"""The rules are the derivative. docs/oracle.md, "How the oracle is checked".

The expanded gradient program is read over the reals (every op the real function, at 80
digits; the f32 constants 0.6931472 and 1.5707964 read as ln 2 and pi/2) and must agree with
central differences of the real-valued forward program to at least 20 digits. The step is
relative to x (1e-30 |x|), so that it means the same at any magnitude, and points within 1e-12
of a kink (a max tie, a comparison flipping, a cast crossing an integer, a pole) are rejected.
Separately, forward mode (dual numbers) must agree with the reverse-mode gradient projected
on a random direction.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gradient_conformance.reference import compile_program
from gradient_conformance.reference.interp import Interpreter
from gradient_conformance.reference.realvalued import Dual, Pair, Real
from tests.smooth import smooth_programs

DIGITS, REQUIRED_DIGITS = 80, 20
KINK_MARGIN = 1e-12
AGREEMENT: dict[str, list[float]] = {"first": [], "second": [], "forward": []}

inputs = st.floats(-2.0, 2.0, width=32, allow_subnormal=False)
relaxed = settings(deadline=None,
                   suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


def _arrays(draw, shape):
    size = math.prod(shape)
    x = [draw(inputs) for _ in range(size)]
    w = [draw(inputs) for _ in range(size)]
    return x, w


def _run(program, domain, x, w, shape, pinned=None):
    mp = domain.mp
    def values(v):
        return np.array([mp.mpf(e) if not isinstance(e, Pair) else e for e in v],
                        dtype=object).reshape(shape)
    zero = domain.literal(0)
    memory = {0: values(x), 1: values(w), 2: np.array(zero, dtype=object),
              3: np.full(shape, zero, dtype=object), 4: np.array(zero, dtype=object)}
    return Interpreter(program, domain).evaluate(memory, pinned)


def _detached(env) -> dict:
    """The values of the detach nodes: constants for finite differences."""
    return {node: value for node, value in env.items() if node.op == "detach"}


def _agree(name, got, fd, f_scale, x_scale) -> None:
    floor = 1e-45 * (1 + abs(f_scale)) / max(abs(x_scale), 1e-3)
    error = abs(got - fd)
    assert error <= 10 ** -REQUIRED_DIGITS * max(abs(got), abs(fd)) + floor, (
        f"{name}: rule gives {got}, finite differences {fd}")
    if max(abs(got), abs(fd)) > floor * 1e20:
        AGREEMENT[name].append(float(-math.log10(max(error / max(abs(got), abs(fd)),
                                                     10.0 ** -DIGITS))))


def _finite_difference(program, x, w, shape, slot, i, margin_check, pinned):
    h = 1e-30 * max(abs(x[i]), 1e-3)
    results = []
    for sign in (1, -1):
        real = Real(DIGITS)
        moved = list(x)
        moved[i] = real.mp.mpf(x[i]) + sign * real.mp.mpf(h)
        results.append(_run(program, real, moved, w, shape, pinned)[0][slot].item())
        margin_check(real)
    return (results[0] - results[1]) / (2 * Real(DIGITS).mp.mpf(h))


def _away_from_kinks(domain) -> None:
    assume(domain.margin > KINK_MARGIN)


def _real_run(case, data):
    """Draw a point, run the program over the reals there; reject points near a kink."""
    program = compile_program(case.source)
    x, w = _arrays(data.draw, case.shape)
    real = Real(DIGITS)
    final, env = _run(program, real, x, w, case.shape)
    _away_from_kinks(real)
    return program, x, w, final, _detached(env)


@relaxed
@given(smooth_programs(), st.data())
def test_gradient_agrees_with_finite_differences(case, data):
    program, x, w, final, detached = _real_run(case, data)
    f = final[2].item()
    for i, got in enumerate(final[3].flat):
        fd = _finite_difference(program, x, w, case.shape, 2, i, _away_from_kinks, detached)
        _agree("first", got, fd, f, x[i])


@relaxed
@given(smooth_programs(max_steps=5, second_order=True), st.data())
def test_second_derivative_agrees_with_finite_differences(case, data):
    program, x, w, final, detached = _real_run(case, data)
    fd = _finite_difference(program, x, w, case.shape, 3, 0, _away_from_kinks, detached)
    _agree("second", final[4].item(), fd, final[3].item(), x[0])


@relaxed
@given(smooth_programs(), st.data())
def test_reverse_mode_agrees_with_forward_mode(case, data):
    program = compile_program(case.source)
    x, w = _arrays(data.draw, case.shape)
    direction = [data.draw(st.integers(-3, 3)) for _ in x]
    real = Real(60)
    gradient = _run(program, real, x, w, case.shape)[0][3]
    assume(real.margin > KINK_MARGIN)
    dual = Dual(60)
    seeded = [Pair(dual.mp.mpf(v), dual.mp.mpf(d)) for v, d in zip(x, direction, strict=True)]
    fixed = [Pair(dual.mp.mpf(v), dual.mp.zero) for v in w]
    forward = _run(program, dual, seeded, fixed, case.shape)[0][2].item().tangent
    reverse = sum(g * d for g, d in zip(gradient.flat, direction, strict=True))
    scale = max(abs(forward), abs(reverse), real.mp.mpf(10) ** -30)
    assert abs(forward - reverse) <= real.mp.mpf(10) ** -40 * scale, (forward, reverse)
    if max(abs(forward), abs(reverse)) > 0:
        error = abs(forward - reverse) / scale
        AGREEMENT["forward"].append(float(-real.mp.log10(max(error, real.mp.mpf(10) ** -60))))


def test_report_agreement(figures):
    """Runs last in this module: the digits of agreement the checks above measured."""
    for name, digits in AGREEMENT.items():
        if digits:
            figures(f"derivative ({name}): {len(digits)} elements compared, min "
                    f"{min(digits):.1f} digits of agreement, median "
                    f"{sorted(digits)[len(digits) // 2]:.1f}")
    assert AGREEMENT["first"], "no first-derivative comparison was made"


def test_a_tie_among_copies_is_a_kink_for_a_gradient_against_the_copies():
    """Issue 53: a reduce max of an expand's six copies, taken against the expanded vector
    itself, was compared with "the true value 0.1666...", where no derivative exists (each
    copy is its own variable there, and all six tie). Against the expand's operand, which
    moves them all at once, there is no kink."""
    import numpy as np

    from gradient_conformance.conformance.readings import Reading
    from gradient_conformance.conformance.true_derivative import truths
    program = ("%a = buffer slot=0 dtype=f32 shape=[]\n%o = buffer slot=1 dtype=f32 "
               "shape={shape}\n%s = load %a\n%v = expand %s shape=[6]\n%m = reduce %v op=max\n"
               "%g = gradient %m {x}\nstore %o %g\n")
    against_copies = Reading(program.format(shape="[6]", x="%v"))
    against_operand = Reading(program.format(shape="[]", x="%s"))
    buffers = {0: np.array(1.5, np.float32)}
    assert truths(against_copies.program(), {**buffers, 1: np.zeros(6, np.float32)}) is None
    assert truths(against_operand.program(), {**buffers, 1: np.zeros((), np.float32)}) \
        is not None
