"""Dereferences a null pointer in run: the process dies of SIGSEGV."""

import ctypes

from gradient_conformance.implementations import fast


def build(source):
    fast.build(source)
    return lambda buffers: ctypes.string_at(0)
