"""The strategies' bounds, one dataclass, checked as Hypothesis checks its own arguments: a
bad value raises InvalidArgument naming the argument, when the strategy is made, so that
`programs(min_steps=5, max_steps=2)` is an error and never a quiet draw of something else.
docs/generators.md, "Generators".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from hypothesis.errors import InvalidArgument

from gradient_conformance.generators.writer import SHAPES
from gradient_conformance.reference import errors
from gradient_conformance.reference.graph import MAX_ELEMENTS
from gradient_conformance.reference.ops import DTYPES, FEATURES

INPUTS = ("anything", "smooth")
MAX_RANK = 4


def whole(name: str, value, *, at_least: int, at_most: int | None = None) -> int:
    """`value`, a whole number in [at_least, at_most]; else InvalidArgument naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be a whole number")
    if value < at_least or (at_most is not None and value > at_most):
        upper = f" and at most {at_most}" if at_most is not None else ""
        raise InvalidArgument(f"{name}={value} must be at least {at_least}{upper}")
    return value


def ordered(low_name: str, low: int, high_name: str, high: int) -> None:
    if low > high:
        raise InvalidArgument(f"{low_name}={low} is more than {high_name}={high}: nothing "
                              "lies between them")


def names(name: str, value, known: Iterable[str], what: str) -> frozenset[str]:
    """`value` as a set of names, each one of `known`."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(f"{name}={value!r} must be a collection of {what}, not "
                              f"{type(value).__name__}")
    given = list(value)
    unknown = sorted({str(v) for v in given if not isinstance(v, str) or v not in known})
    if unknown:
        raise InvalidArgument(f"{name} names {', '.join(map(repr, unknown))}, which "
                              f"{'is' if len(unknown) == 1 else 'are'} not {what}: "
                              f"{', '.join(sorted(known))}")
    return frozenset(given)


def one_of(name: str, value, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InvalidArgument(f"{name}={value!r} must be one of {', '.join(choices)}")
    return value


def shapes_of(name: str, value) -> tuple[tuple[int, ...], ...]:
    """Base shapes: a non-empty collection of shapes, each a tuple of at most MAX_RANK dims of
    at least 0 (a 0-length dim makes an empty value), of at most MAX_ELEMENTS elements."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(f"{name}={value!r} must be a collection of shapes (tuples)")
    found = tuple(value)
    if not found:
        raise InvalidArgument(f"{name} is empty: a program needs a shape to draw")
    for shape in found:
        if not isinstance(shape, tuple) or len(shape) > MAX_RANK or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise InvalidArgument(f"{name} holds {shape!r}: a shape is a tuple of at most "
                                  f"{MAX_RANK} dims, each a whole number of at least 0")
        size = math.prod(shape)
        if size > MAX_ELEMENTS:
            raise InvalidArgument(f"{name} holds {shape!r}, of {size} elements: more than "
                                  f"the {MAX_ELEMENTS} SPEC.md allows a value")
    return found


@dataclass(frozen=True)
class Bounds:
    """What one strategy was asked for, checked. Each strategy reads the fields it takes:
    the programs' (`min_steps` .. `inputs`), a differentiable program's (`min_gradients`,
    `store_values`), the order-sensitive gradients' (`min_shares`, `max_shares`), and the
    rejections' (`rules`, `max_noise`)."""

    min_steps: int = 1
    max_steps: int = 12
    exclude: frozenset[str] = frozenset()
    shapes: tuple[tuple[int, ...], ...] = SHAPES
    dtypes: tuple[str, ...] = DTYPES
    inputs: str = "anything"
    min_gradients: int = 0
    store_values: bool | None = None
    min_shares: int = 3
    max_shares: int = 6
    rules: tuple[str, ...] = errors.RULES
    max_noise: int = 3

    def __post_init__(self):
        whole("min_steps", self.min_steps, at_least=1)
        whole("max_steps", self.max_steps, at_least=1, at_most=200)
        ordered("min_steps", self.min_steps, "max_steps", self.max_steps)
        object.__setattr__(self, "exclude", names("exclude", self.exclude, FEATURES,
                                                  "features of the IR"))
        object.__setattr__(self, "shapes", shapes_of("shapes", self.shapes))
        dtypes = names("dtypes", self.dtypes, DTYPES, "dtypes of the IR")
        if "f32" not in dtypes:
            raise InvalidArgument(f"dtypes={self.dtypes!r} must include 'f32': every program "
                                  "computes in f32")
        object.__setattr__(self, "dtypes", tuple(d for d in DTYPES if d in dtypes))
        one_of("inputs", self.inputs, INPUTS)
        whole("min_gradients", self.min_gradients, at_least=0, at_most=8)
        if self.store_values not in (None, True, False):
            raise InvalidArgument(f"store_values={self.store_values!r} must be True, False or "
                                  "None (drawn)")
        # Two shares sum alike in either order: order sensitivity needs three.
        whole("min_shares", self.min_shares, at_least=3, at_most=32)
        whole("max_shares", self.max_shares, at_least=3, at_most=32)
        ordered("min_shares", self.min_shares, "max_shares", self.max_shares)
        rules = names("rules", self.rules, errors.RULES, "rejection rules of SPEC.md")
        if not rules:
            raise InvalidArgument("rules is empty: name at least one rejection rule")
        order = tuple(dict.fromkeys(self.rules)) if isinstance(self.rules, list | tuple) \
            else errors.RULES  # a set has no order to keep: the spec's
        object.__setattr__(self, "rules", tuple(r for r in order if r in rules))
        whole("max_noise", self.max_noise, at_least=0, at_most=20)
