"""Builds like the fast implementation, and returns no slots at all from run."""

from gradient_conformance.implementations import fast


def build(source):
    fast.build(source)
    return lambda buffers: {}
