"""A fault written outside the catalogue: exp2's share with ln 2 rounded down to 0.6931471
(the spec's is 0.6931472, ln 2 rounded to nearest), and a tape whose last entry receives
2.0. No variant of the catalogue makes either, so every divergence must be diagnosed as "no
known variant", never as a wrong one."""

import dataclasses

from gradient_conformance import reference
from gradient_conformance.reference import exact, rules
from gradient_conformance.reference.tape import backprop_bits

NAME = "exp2-constant"


def _exp2(e, u, g, k):
    return e("mul", e("mul", g, u), e.f32("0.6931471"))


SEMANTICS = dataclasses.replace(reference.SPEC, rules={**rules.RULES, "exp2": _exp2})


def build(source):
    return reference.build(source, SEMANTICS)


def backprop(tape):
    return [exact.decode(exact.f32_mul(b, exact.f32_from_text("2.0")))
            for b in backprop_bits(tape)]
