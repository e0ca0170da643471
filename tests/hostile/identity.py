"""Validates like the fast implementation, then returns every slot as it came."""

from gradient_conformance.implementations import fast


def build(source):
    fast.build(source)
    return lambda buffers: buffers
