"""Correct (the fast implementation), but at import it maps a 300 MB file of its private
folder and reads every page: resident memory that no limit on its data segment counts. A
worker whose memory grew past the limit is started again, not left holding it."""

import mmap
import tempfile

from gradient_conformance.implementations.fast import CAPABILITIES, build  # noqa: F401

SIZE = 300 << 20
with tempfile.TemporaryFile() as backing:
    backing.truncate(SIZE)
    _held = mmap.mmap(backing.fileno(), SIZE, mmap.MAP_SHARED)
    for offset in range(0, SIZE, mmap.PAGESIZE):
        _held[offset] = 1
