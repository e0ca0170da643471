"""A variant's code against its own sentence, on programs that show it (issue 53): where a
sentence says what a variant computes in the spec's own terms, the variant's outcome is the
spec's on the program its sentence describes. `nonscalar-loss-summed` ("summing it
implicitly") and `without-loss-not-f32-scalar` ("a non-scalar loss is summed implicitly")
gave 1.0 for the loss `expand %x shape=[2]`, where summing gives 2.0."""

from __future__ import annotations

import numpy as np
import pytest

from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.readings import Reading

# Losses that are f32 but no scalar, each of x (an f32 of shape [3]) or of its first element.
LOSSES = {
    "expand of a scalar": ("%e = reduce %x op=max", "%y = expand %e shape=[2]"),
    "expand to two axes": ("%e = reduce %x op=add", "%y = expand %e shape=[2,3]"),
    "a vector": ("%e = mul %x %x", "%y = mul %e 0.5"),
    "a shape [1]": ("%e = reduce %x op=add axis=[0]", "%y = mul %e %e"),
}
SUMMING = ["nonscalar-loss-summed", "without-loss-not-f32-scalar"]


def _program(loss: tuple[str, str], summed: bool) -> str:
    body = "\n".join(loss)
    last = "%l = reduce %y op=add\n%g = gradient %l %x" if summed else "%g = gradient %y %x"
    return ("%a = buffer slot=0 dtype=f32 shape=[3]\n%o = buffer slot=1 dtype=f32 shape=[3]\n"
            f"%x = load %a\n{body}\n{last}\nstore %o %g\n")


@pytest.mark.parametrize("name", SUMMING)
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_a_variant_that_sums_a_loss_gives_the_gradient_of_its_sum(name, loss):
    buffers = {0: np.array([1.5, -2.0, 0.75], np.float32), 1: np.zeros(3, np.float32)}
    implicit = Reading(_program(LOSSES[loss], summed=False))
    explicit = Reading(_program(LOSSES[loss], summed=True))
    assert implicit.outcome(buffers).status == "rejected"  # the spec's: a rule's rejection
    theirs = implicit.outcome(buffers, CATALOGUE[name].semantics())
    summed = explicit.outcome(buffers)
    assert theirs.status == summed.status == "ok"
    assert theirs.buffers[1].tobytes() == summed.buffers[1].tobytes(), \
        (theirs.buffers[1], summed.buffers[1])
