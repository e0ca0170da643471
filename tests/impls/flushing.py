"""An implementation that, as some kernel languages do for their whole process, sets the
CPU's floating-point environment at import: flush-to-zero and denormals-are-zero (MXCSR bits
15 and 6) and rounding upwards. Its results are the reference's, which computes in integers
and so does not see them; the suite's code that runs in its process (the protocol's side,
the kit's parsing) must not either: it gets no divergence (docs/isolation.md, "Isolation").
x86-64 with glibc only: `fenv_t` keeps MXCSR in its last four bytes there."""

import ctypes
import ctypes.util
import platform

from gradient_conformance import reference
from gradient_conformance.reference import exact
from gradient_conformance.reference.tape import backprop_bits

NAME = "flushing"
FE_UPWARD = 0x800


def _flush() -> None:
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    env = ctypes.create_string_buffer(32)  # x86-64 glibc fenv_t; MXCSR at offset 28
    assert libm.fegetenv(env) == 0
    mxcsr = int.from_bytes(env.raw[28:32], "little") | 0x8040  # FTZ | DAZ
    env = ctypes.create_string_buffer(env.raw[:28] + mxcsr.to_bytes(4, "little"), 32)
    assert libm.fesetenv(env) == 0 and libm.fesetround(FE_UPWARD) == 0


if platform.machine() in ("x86_64", "AMD64"):
    _flush()


def build(source):
    return reference.build(source)


def backprop(tape):
    return [exact.decode(b) for b in backprop_bits(tape)]
