"""How fast each strategy draws, beside Hypothesis's own rate for a trivial strategy in the
same process and run: the measure of a strategy's cost that does not depend on how loaded
the machine is. `gradient-conformance mutants` and `benchmarks/suite_speed.py` print it.
SPEC.md, "Benchmarks"."""

from __future__ import annotations

import statistics
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gradient_conformance.generators import strategies as programs_of
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


def draw_rate(strategy, examples: int) -> float:
    """Cases drawn per second from `strategy` (derandomized, generating only), checking
    nothing."""
    drawn = []

    @settings(max_examples=examples, database=None, derandomize=True, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def draw_only(data):
        drawn.append(data.draw(strategy))

    start = time.perf_counter()
    draw_only()
    return len(drawn) / (time.perf_counter() - start)


def beside_trivial(strategy, examples: int = 200, rounds: int = 3) -> tuple[float, float]:
    """(cases per second drawn from `strategy`, that rate over the trivial strategy's). Each
    round measures the trivial strategy and then this one, and the medians over `rounds` are
    kept: a shared machine's speed drifts over a run, and a ratio of two measures taken
    together does not (nor does Hypothesis's warm-up, paid by every round's trivial alike)."""
    pairs = []
    for _ in range(rounds):
        base = draw_rate(st.integers(), examples)
        rate = draw_rate(strategy, examples)
        pairs.append((rate, rate / base))
    return statistics.median(r for r, _ in pairs), statistics.median(q for _, q in pairs)


def draw_rates(examples: int = 200, rounds: int = 3) -> dict[str, tuple[float, float]]:
    """name -> beside_trivial, for every strategy of STRATEGIES."""
    return {name: beside_trivial(make(), examples, rounds) for name, make in STRATEGIES.items()}


def rates_table(rates: dict[str, tuple[float, float]]) -> str:
    """The rates, each beside its share of the trivial strategy's."""
    return "\n".join(f"{name:<30} {rate:>9.1f}/s  {share:>6.1%} of trivial"
                      for name, (rate, share) in rates.items())
