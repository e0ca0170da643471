"""The reference, with the last bit of every f32 it returns flipped, but only in a program of
LINES lines or more: most drawn programs diverge, while Hypothesis's first, simplest case (a
short program) does not. A run allowed one new case therefore finds the fault only by
replaying what a database kept (tests/test_fuzz.py)."""

import numpy as np

from gradient_conformance import reference

NAME = "off-when-long"
LINES = 8


def build(source):
    run = reference.build(source)
    long = len([line for line in source.splitlines() if line.strip()]) >= LINES

    def flipped(buffers):
        out = run(buffers)
        if long:
            for a in out.values():
                if a.dtype == np.float32:
                    a.view(np.uint32)[...] ^= np.uint32(1)
        return out

    return flipped
