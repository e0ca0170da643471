"""A strategy's small choices: each one of Hypothesis's own, or packed, read a byte or a few
at a time from chunks of bytes, each chunk one choice of Hypothesis's.

Each choice Hypothesis makes costs tens of microseconds of its own machinery (a span, a
record, its tree of choices tried), and a case of forty-odd small choices spent more than
half its draw there. A chunk of bytes is one choice, and Hypothesis shrinks it byte by byte,
each byte as an integer towards zero, after trying all zeros at once
(hypothesis/internal/conjecture/shrinking/bytes.py), so a choice read from bytes shrinks
towards `low`, the first option, or False, as a choice of its own does. A choice of many
bytes reads them most significant first, so the later ones shrink to the shorter value.

Packed is for values whose choices do not decide a program's shape: a buffer's elements,
a differentiable program's input values, a tape, an order-sensitive case. A program's
structure is drawn one choice of Hypothesis's at a time (`packed=False`): its shrinker then
has a move for every choice (delete it, lower it, pass to a span within it), and packed
structure shrank counterexamples to larger programs (`python -m benchmarks.shrink_sizes`,
2026-12-03: medians of 11.5 and 12 statements over ten seeds for two seeded faults, against
9 and 9 drawn one choice at a time). Either way a choice with one option is drawn too (a
byte, or Hypothesis's integer of one value), so that when an option count changes from one
to two as the shrinker rewrites what came before, the choices after it stay aligned: left
out, one of those faults shrank to a median of 12 statements instead of 8.

Strategies are values, so the chunk and integer strategies are made once (functools.cache):
Hypothesis validates each strategy object the first time it sees one, and one made anew per
draw is validated anew.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from hypothesis import strategies as st

T = TypeVar("T")
CHUNK = 16  # bytes in a chunk


@functools.cache
def chunks(size: int) -> st.SearchStrategy[bytes]:
    """`size` bytes, one choice."""
    return st.binary(min_size=size, max_size=size)


@functools.cache
def integers(low: int, high: int) -> st.SearchStrategy[int]:
    """st.integers(low, high), one choice."""
    return st.integers(low, high)


class Stream:
    """Small choices for one strategy's draw, from chunks drawn as they are needed.

    `draw` is the draw of the composite being drawn (a step rebinds it to its own).
    `chunk`: how many bytes a chunk holds; a choice that needs more than are left starts a
    new one, so no choice straddles two. `packed=False`: every choice is one of Hypothesis's
    own, a bounded integer, as a program's structure is drawn (the module says why).
    """

    def __init__(self, draw: Callable, chunk: int = CHUNK, *, packed: bool = True):
        self.draw, self.chunk, self.packed = draw, chunk, packed
        self._bytes, self._at = b"", 0

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high], shrinking towards low: one choice of Hypothesis's, or
        as many bytes as the range needs (one for a range of one: the module says why)."""
        assert low <= high, f"an empty range [{low}, {high}]: the strategy's bounds unchecked"
        if not self.packed:
            return self.draw(integers(low, high))
        count = high - low + 1
        width = max(1, ((count - 1).bit_length() + 7) // 8)
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
