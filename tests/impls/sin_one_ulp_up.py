"""The reference, except that every finite, nonzero result of sin is one ulp larger in
magnitude than the correctly rounded one: within the 1 ulp it declares for sin, and bit
exact in every other op. Its gradient of sin, g * sin(a + pi/2), is then off by up to about
2 ulps, which its claim for sin does not bound (issue 53): a check compares that gradient
with the true derivative, not within sin's ulps."""

import dataclasses

from gradient_conformance import reference
from gradient_conformance.reference import exact
from gradient_conformance.reference.interp import ExactF32
from gradient_conformance.reference.semantics import SPEC

NAME = "sin one ulp up"
CAPABILITIES = {"ulp": {"sin": 1}}


def _sin(a: int) -> int:
    bits = exact.f32_sin(a)
    magnitude = bits & 0x7FFFFFFF
    if magnitude == 0 or magnitude >= 0x7F7FFFFF:  # a zero, the largest finite, inf or NaN
        return bits
    return bits + 1  # the next f32 away from zero, its sign kept


class _OneUlpUp(ExactF32):
    sin = staticmethod(_sin)


SEMANTICS = dataclasses.replace(SPEC, domain=_OneUlpUp())


def build(source):
    return reference.build(source, SEMANTICS)
