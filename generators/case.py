"""A generated test case."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Case:
    """One program with its inputs and what it must do.

    `expect_error`: the rejection rule code the program must trigger at build (SPEC.md, "When
    gradient is rejected"), or None for a valid program. `kink_distance`: for inputs drawn in
    smooth mode, how close the run comes to a kink (a max tie, a comparison flipping, a cast
    crossing an integer, a pole, exp2 overflow), measured over the reals; None otherwise.
    `features`: the ops and features the program uses (`higher_order` among them), so a suite
    can leave out what an implementation does not support. `parsed`: the program's statements
    as the writer parsed them (empty where it did not), so the check reads the program
    without parsing it again; `built`: the program as the spec builds it, where the strategy
    built it (to measure the kink distance), so the check does not build it again.
    """

    source: str
    buffers: dict[int, np.ndarray]
    expect_error: str | None
    description: str
    kink_distance: float | None = None
    features: frozenset[str] = field(default_factory=frozenset)
    parsed: tuple = field(default=(), repr=False, compare=False)
    built: object = field(default=None, repr=False, compare=False)

    @property
    def statements(self) -> int:
        """How many statements the program has (comments and blank lines aside)."""
        return sum(1 for line in self.source.splitlines() if line.split("#")[0].strip())
