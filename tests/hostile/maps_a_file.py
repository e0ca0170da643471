"""Correct (the fast implementation), but at import it maps 300 MB of shared memory and
touches every page: resident memory that no limit on its data segment counts (a shared
mapping is not data), and that a sandbox's small tmpfs would not hold as a file. A worker
whose memory grew past the limit is started again, not left holding it."""

import mmap

from gradient_conformance.implementations.fast import CAPABILITIES, build  # noqa: F401

SIZE = 300 << 20
_held = mmap.mmap(-1, SIZE, mmap.MAP_SHARED)
for offset in range(0, SIZE, mmap.PAGESIZE):
    _held[offset] = 1
