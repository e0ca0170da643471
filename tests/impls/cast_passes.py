"""What a real framework does with a cast (PyTorch, JAX: a cast to i32 and back is a
differentiable op there, or the cast is dropped): the gradient passes through a cast to i32
and back, where the spec's is 0. It claims no bit-exact gradients, as no framework does, so
the case files that test that rule must compare their gradient slots with the true
derivative, not leave them out (docs/suite.md, "What a pass compared")."""

from gradient_conformance import reference
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE

NAME = "cast-passes"
CAPABILITIES = {"bit_exact_gradients": False}
SEMANTICS = CATALOGUE["i32-cast-passes"].semantics()


def build(source):
    return reference.build(source, SEMANTICS)
