"""One choice of Hypothesis's at a time, through strategies made once.

Hypothesis validates every strategy object it is handed the first time it sees it, and
a strategy built anew for each choice (`st.integers(0, k)`, `st.sampled_from(a_list)`) is
validated anew each time: that cost a third of a program's draw. Strategies are values, so
keeping them shares no state between examples. Each choice shrinks towards `low`, the first
option, or False.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


@functools.cache
def integers(low: int, high: int) -> st.SearchStrategy[int]:
    """st.integers(low, high), made once per bounds."""
    return st.integers(low, high)


def integer(draw: Callable, low: int, high: int) -> int:
    """An integer in [low, high]."""
    return draw(integers(low, high))


def choose(draw: Callable, options: Sequence[T]) -> T:
    """One of `options`, as an index (so the options need not be hashable)."""
    return options[draw(integers(0, len(options) - 1))]


def flip(draw: Callable) -> bool:
    return draw(integers(0, 1)) == 1
