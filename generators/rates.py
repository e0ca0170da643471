"""How fast each strategy draws, beside Hypothesis's own rate for a trivial strategy in the
same process and run: the measure of a strategy's cost that does not depend on how loaded
the machine is. `gradient-conformance mutants` and `benchmarks/suite_speed.py` print it.
docs/benchmarks.md, "Benchmarks"."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gradient_conformance import generators as programs_of
from gradient_conformance.generators import tapes as tapes_of

# The trivial strategy first: Hypothesis's own cost of an example, with nothing to build.
STRATEGIES = {
    "trivial (st.integers())": st.integers,
    **{f"{name}()": getattr(programs_of, name) for name in (
        "programs", "exact_programs", "differentiable_programs", "order_sensitive_gradients",
        "invalid_gradients", "near_misses")},
    **{f"{name}()": getattr(tapes_of, name) for name in (
        "tapes", "order_sensitive_tapes", "invalid_tapes")},
}


def draw_rate(strategy, examples: int) -> tuple[float, float]:
    """(cases drawn per second from `strategy`, Hypothesis choices per case), derandomized,
    generating only, checking nothing."""
    drawn, choices = [], []

    @settings(max_examples=examples, database=None, derandomize=True, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def draw_only(data):
        drawn.append(data.draw(strategy))
        choices.append(len(data.conjecture_data.choices))

    start = time.perf_counter()
    draw_only()
    return len(drawn) / (time.perf_counter() - start), statistics.mean(choices or [0])


_CHOICE = st.integers(0, 5)
TRIVIAL_EXAMPLES = 1000


@st.composite
def choices_only(draw, count: int) -> int:
    """`count` choices and nothing else: what Hypothesis alone costs a strategy that makes
    as many."""
    return sum(draw(_CHOICE) for _ in range(count))


@dataclass(frozen=True)
class Rate:
    """A strategy's draw rate (cases per second) and the choices a case takes, beside
    Hypothesis's own rate for a trivial strategy (one choice) and for `choices_only` of as
    many choices: the first share is the issue's measure, the second what is left to the
    strategy's own code."""

    rate: float
    of_trivial: float
    choices: float
    of_choices: float


def beside_trivial(strategy, examples: int = 200, rounds: int = 3) -> Rate:
    """The draw rate of `strategy` (Rate). Each round measures the trivial strategy, then
    this one, then as many bare choices, and the medians over `rounds` are kept: a shared
    machine's speed drifts over a run, and a ratio of measures taken together does not (nor
    does Hypothesis's warm-up, paid by every round's trivial alike)."""
    rounds_seen = []
    for _ in range(rounds):
        # A trivial example takes a fraction of a millisecond: a few hundred of them are
        # over too soon to time steadily, so the trivial strategy draws at least a thousand.
        base, _ = draw_rate(st.integers(), max(examples, TRIVIAL_EXAMPLES))
        rate, choices = draw_rate(strategy, examples)
        bare, _ = draw_rate(choices_only(max(1, round(choices))), examples)
        rounds_seen.append((rate, rate / base, choices, rate / bare))
    return Rate(*(statistics.median(r[k] for r in rounds_seen) for k in range(4)))


def draw_rates(examples: int = 200, rounds: int = 3) -> dict[str, Rate]:
    """name -> beside_trivial, for every strategy of STRATEGIES."""
    return {name: beside_trivial(make(), examples, rounds) for name, make in STRATEGIES.items()}


def rates_table(rates: dict[str, Rate]) -> str:
    """The rates, each beside its share of the trivial strategy's, and of Hypothesis's rate
    for as many bare choices."""
    head = (f"{'strategy':<30} {'cases/s':>9}  {'of trivial':>10}  {'choices':>7}  "
            f"{'of as many bare choices':>23}")
    return "\n".join([head] + [
        f"{name:<30} {r.rate:>9.1f}  {r.of_trivial:>10.1%}  {r.choices:>7.1f}  "
        f"{r.of_choices:>23.1%}" for name, r in rates.items()])
