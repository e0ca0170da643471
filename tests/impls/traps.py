"""The kernel-style system of flat_kernels.py, whose integer division traps as x86's does: a
divisor of zero, or -2^31 over -1, kills the process with SIGFPE. `TRAPS_DECLARED=0` in the
environment leaves the declaration out. tests/test_capabilities.py; SPEC.md, "The protocol".
"""

from __future__ import annotations

import os
import signal
import sys
from typing import ClassVar

import numpy as np

from tests.impls import flat_kernels


def trapping(fn):
    def op(a, b, **keywords):
        if np.any(b == 0) or np.any((a == -(2**31)) & (b == -1)):
            os.kill(os.getpid(), signal.SIGFPE)
        return fn(a, b, **keywords)
    return op


class Traps(flat_kernels.FlatKernels):
    name = "traps"
    ops: ClassVar[dict] = {**flat_kernels.OPS, **{
        op: trapping(flat_kernels.OPS[op]) for op in ("idiv", "mod")}}
    capabilities: ClassVar[dict] = {
        **flat_kernels.FlatKernels.capabilities, "environment": ["TRAPS_DECLARED"],
        "integer_division_traps": os.environ.get("TRAPS_DECLARED") != "0"}


FRAMEWORK = Traps()
# What the kit loaded into this process: gmpy2 only if the suite let it.
NAME, VERSION = FRAMEWORK.name, f"gmpy2 {'gmpy2' in sys.modules}"
CAPABILITIES = FRAMEWORK.capabilities
build = FRAMEWORK.build
