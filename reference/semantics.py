"""The spec's choices as one value: what `gradient` builds (the rules, the order of the walk,
how shares are summed, which edges a gradient flows along, which programs are rejected), which
nodes are one (hash consing), and how values are computed (the f32 domain, literals, the tape
exercise). SPEC.md, "gradient", "The rules", "Hash consing", "Values and arithmetic", "Tapes".

`SPEC` is the spec, and the default of everything in the reference. Each field is one of the
spec's own functions or tables, so reading this module is reading the list of what the spec
decides. The suite's catalogue of variants (conformance/diagnosis/variants.py) makes other values of
this type, each the spec with one choice made otherwise, to say what an implementation did
instead; nothing here knows of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from . import errors, exact
from .gradient import OPERANDS, depends_on, flows, left_fold, post_order
from .graph import hoisted_scope, scoped_key
from .interp import EXACT
from .rules import RULES


def as_written(source: str) -> str:
    """The text form as the parser reads it: the text itself."""
    return source


def tape_left_fold(domain, shares: list, senders: list):
    """The tape's sum of an entry's shares: a left fold in arrival order, in `domain`."""
    total = shares[0]
    for share in shares[1:]:
        total = domain.add(total, share)
    return total


def tape_last_to_first(entries: list) -> range:
    """The order the walk processes a tape's entries in: from the last to the first."""
    return range(len(entries) - 1, -1, -1)


def tape_passes_on(domain, derivative) -> bool:
    """Whether an entry that received shares passes shares on: always, whatever their sum
    (a derivative of +-0.0 too: 0.0 * inf is NaN, and -0.0 is a share)."""
    return True


def tape_operands(i: int, j: int) -> tuple[int, ...]:
    """Which operands an entry passes shares to, in order: i (position 0), then j (1), and
    i twice when i == j."""
    return (0, 1)


def tape_leaf(domain, kind: str, derivative):
    """An input's or a constant's derivative: what it received, whatever its kind."""
    return derivative


@dataclass(frozen=True)
class Semantics:
    """Everything `build` and `backprop` may be asked to do otherwise than the spec."""

    # gradient (SPEC.md, "The walk", "The rules", "When gradient is rejected")
    rules: Mapping[str, Callable] = field(default_factory=lambda: RULES)
    post_order: Callable = post_order  # (y) -> y's graph in post-order; the walk reverses it
    fold: Callable = left_fold  # (emitter, shares, senders) -> their sum, as a node
    flows: Callable = flows  # (node, operand) -> may a gradient flow from node to operand
    depends_on: Callable = depends_on  # (y, x, stored_values, flows) -> the nodes carrying x
    range_inputs: Callable = OPERANDS  # node -> what its dependence on a range goes through
    rejections: frozenset[str] = frozenset(errors.RULES)  # the rejection rules in force
    more_rejections: tuple[Callable, ...] = ()  # (y, x, stored_values) -> a reason, or None
    # the text form (SPEC.md, "Text form"): the text a program is parsed from
    reads: Callable[[str], str] = as_written
    # hash consing (SPEC.md, "Hash consing")
    key: Callable = scoped_key
    scope_of: Callable = hoisted_scope
    # values (SPEC.md, "Values and arithmetic")
    domain: object = EXACT  # the f32 arithmetic, and the forms of any other op it overrides
    literal: Callable[[str], int] = exact.f32_from_text  # an f32 literal's text -> its bits
    # the tape exercise (SPEC.md, "Tapes")
    tape_domain: object = EXACT
    tape_order: Callable = tape_last_to_first  # (entries) -> the order they are processed
    tape_fold: Callable = tape_left_fold  # (domain, shares, senders) -> their sum
    tape_passes_on: Callable = tape_passes_on  # (domain, derivative) -> pass shares on?
    tape_operands: Callable = tape_operands
    tape_leaf: Callable = tape_leaf


SPEC = Semantics()
