"""The reference, with the last bit of every f32 it returns flipped: every case of every
check that compares f32 bits diverges, so a test of where divergences end up (the cluster's
store, tests/test_fuzz_cluster.py) does not rest on how often a subtler fault shows."""

import numpy as np

from gradient_conformance import reference

NAME = "last-bit-off"


def build(source):
    run = reference.build(source)

    def flipped(buffers):
        out = run(buffers)
        for a in out.values():
            if a.dtype == np.float32:
                a.view(np.uint32)[...] ^= np.uint32(1)
        return out

    return flipped
