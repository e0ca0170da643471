"""A strategy's small choices, packed: read a byte or a few at a time from chunks of bytes,
each chunk one choice of Hypothesis's.

Each choice Hypothesis makes costs tens of microseconds of its own machinery (a span, a
record, its tree of choices tried): a program of forty-odd small choices spent more than half
its draw there. A chunk of bytes is one choice, and Hypothesis shrinks it byte by byte, each
byte as an integer towards zero, after trying all zeros at once
(hypothesis/internal/conjecture/shrinking/bytes.py). A choice read from bytes is therefore
shrunk as it was when it was a choice of its own: towards `low`, the first option, or False.
A choice of many bytes reads them most significant first, so the later ones shrink to the
shorter value. A strategy starts a fresh chunk (`fresh`) where it opens a span of its own,
so that the shrinker, deleting the span, deletes its choices with it.

Strategies are values, so the chunk strategies are made once (functools.cache): Hypothesis
validates each strategy object the first time it sees one, and one made anew per draw is
validated anew.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from hypothesis import strategies as st

T = TypeVar("T")
CHUNK = 16  # bytes in a chunk: a step of a program reads fewer


@functools.cache
def chunks(size: int) -> st.SearchStrategy[bytes]:
    """`size` bytes, one choice."""
    return st.binary(min_size=size, max_size=size)


class Stream:
    """Small choices for one strategy's draw, from chunks drawn as they are needed.

    `draw` is the draw of the composite being drawn (a step rebinds it to its own).
    `chunk`: how many bytes a chunk holds; a choice that needs more than are left starts a
    new one, so no choice straddles two.
    """

    def __init__(self, draw: Callable, chunk: int = CHUNK):
        self.draw, self.chunk = draw, chunk
        self._bytes, self._at = b"", 0

    def fresh(self) -> None:
        """Start the next choice in a chunk of its own (drawn in the current span)."""
        self._at = len(self._bytes)

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high], shrinking towards low: as many bytes as the range
        needs, none for a range of one."""
        count = high - low + 1
        if count <= 1:
            return low
        width = ((count - 1).bit_length() + 7) // 8
        if self._at + width > len(self._bytes):
            self._bytes, self._at = self.draw(chunks(max(self.chunk, width))), 0
        value = int.from_bytes(self._bytes[self._at:self._at + width], "big")
        self._at += width
        return low + value % count

    def choose(self, options: Sequence[T]) -> T:
        """One of `options`, shrinking towards the first (by index, so they need not be
        hashable)."""
        return options[self.integer(0, len(options) - 1)]

    def flip(self) -> bool:
        """True or False, shrinking towards False."""
        return self.integer(0, 1) == 1

    def signed(self, most: int) -> int:
        """An integer in [-most, most], shrinking towards 0 (0, -1, 1, -2, 2, ...)."""
        k = self.integer(0, 2 * most)
        return (k + 1) // 2 * (-1 if k % 2 else 1)

    def order(self, items: Sequence[T]) -> list[T]:
        """The items in an order drawn, shrinking towards the order given."""
        rest, out = list(items), []
        while rest:
            out.append(rest.pop(self.integer(0, len(rest) - 1)))
        return out


def stream_of(make: Callable[[Stream], T], chunk: int = CHUNK) -> st.SearchStrategy[T]:
    """A strategy drawing `make(stream)` from a stream of its own: for values made of small
    choices that a caller wants as a strategy (a list of f32 values, say)."""
    @st.composite
    def from_stream(draw) -> T:
        return make(Stream(draw, chunk))
    return from_stream()
