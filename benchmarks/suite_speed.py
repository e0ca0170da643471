"""The suite's own speed: `python -m benchmarks.suite_speed [--examples N]`. docs/benchmarks.md,
"Benchmarks". It prints figures; it asserts nothing (these machines are shared and noisy).

1. Cases checked per second, per check, against the reference and the fast implementation,
   beside what Hypothesis alone draws per second from the same strategy (a test that draws
   and checks nothing: the ceiling). Targets: checking at least half the draw-only rate; the
   finite-difference check at least 30 per second.
2. The reference's build (parse, check, expand) and run of chains of 10^3, 10^4 and 10^5
   nodes, per node, and the growth between sizes.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time

import numpy as np

from benchmarks.workloads.make import chain
from gradient_conformance import reference
from gradient_conformance.conformance.commands.suite import suite_arguments
from gradient_conformance.conformance.options import PROPERTY
from gradient_conformance.generators import (
    differentiable_programs,
    exact_programs,
    invalid_gradients,
)
from gradient_conformance.generators.rates import beside_trivial

# What is measured -> (the check, as pytest -k selects it; the strategy it draws from).
CHECKS = {
    "forward bits": ("test_exact_programs_bit_for_bit", exact_programs),
    "gradient bits": ("test_gradients_bit_for_bit", differentiable_programs),
    "finite differences": ("test_gradients_are_near_the_true_derivative",
                           differentiable_programs),
    "rejection": ("test_invalid_gradients_are_rejected", lambda exclude: invalid_gradients()),
}


class _Rates:
    """A pytest plugin that adds up the cases the checks ran (from their records) and the
    time their call phases took."""

    def __init__(self):
        self.cases, self.seconds = 0, 0.0

    def pytest_runtest_logreport(self, report):
        for name, value in report.user_properties:
            if name == PROPERTY and report.when == "call":
                self.cases += json.loads(value).get("cases", 0)
                self.seconds += report.duration


def check_rate(check: str, spec: str, n: int) -> float:
    """Cases checked per second by one of the suite's checks, run as the suite runs it (the
    implementation's start left out)."""
    import pytest
    rates = _Rates()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        pytest.main(suite_arguments([f"--impl={spec}", "--profile=ci", f"--max-examples={n}",
                                     "--no-shrink", "-k", check, "-p", "no:cacheprovider",
                                     "-q"]), plugins=[rates])
    return rates.cases / max(rates.seconds, 1e-9)


def chain_figures(sizes=(1_000, 10_000, 100_000), *,
                  collect: bool = True) -> list[tuple[int, float, float]]:
    """(nodes, build s per node, run s per node) for the reference, with Python's cyclic
    garbage collector on (as under the suite) or off (which shows what the reference's own
    work costs: the collector rescans the growing graph of nodes, which is not linear)."""
    out = []
    was = gc.isenabled()
    if not collect:
        gc.disable()
    try:
        out = _chains(sizes)
    finally:
        if was:
            gc.enable()
    return out


def _chains(sizes) -> list[tuple[int, float, float]]:
    out = []
    for n in sizes:
        source = chain(n)
        start = time.perf_counter()
        run = reference.build(source)
        built = time.perf_counter() - start
        inputs = {0: np.array(0.5, np.float32), 1: np.zeros(2, np.float32)}
        start = time.perf_counter()
        run(inputs)
        ran = time.perf_counter() - start
        out.append((n, built / n, ran / n))
        gc.collect()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite_speed")
    parser.add_argument("--examples", type=int, default=200, help="examples per measurement")
    parser.add_argument("--impl", action="append", default=None,
                        help="implementations (default: reference and the fast one)")
    parser.add_argument("--no-chains", action="store_true")
    args = parser.parse_args(argv)
    impls = args.impl or ["reference", "gradient_conformance.implementations.fast"]
    print(f"cases per second, {args.examples} examples each (derandomized); 'of trivial' is "
          "the draw rate over Hypothesis's own for a trivial strategy measured beside it "
          "(median of 3 rounds)")
    print(f"{'check':<20} {'draw only':>10} {'of trivial':>10} " +
          " ".join(f"{i.rsplit('.', 1)[-1]:>22}" for i in impls) + "  target")
    for name, (check, strategy) in CHECKS.items():
        measured = beside_trivial(strategy(exclude=frozenset()), args.examples)
        drawn, share = measured.rate, measured.of_trivial
        rates = [check_rate(check, impl, args.examples) for impl in impls]
        target = 30.0 if name == "finite differences" else drawn / 2
        verdict = "met" if min(rates) >= target else "MISSED"
        print(f"{name:<20} {drawn:>10.1f} {share:>10.0%} " +
              " ".join(f"{r:>12.1f} ({r / drawn:>4.0%} of draw)" for r in rates) +
              f"  >= {target:.1f}: {verdict}")
    if not args.no_chains:
        for collect in (True, False):
            print(f"\nthe reference on chains, seconds per node, garbage collector "
                  f"{'on' if collect else 'off'}")
            print(f"{'nodes':>8} {'build':>12} {'run':>12} {'build growth':>13} "
                  f"{'run growth':>11}")
            previous = None
            for n, build, run in chain_figures(collect=collect):
                growth = "" if previous is None else \
                    f"{build / previous[0]:>12.2f}x {run / previous[1]:>10.2f}x"
                print(f"{n:>8} {build * 1e6:>10.1f}us {run * 1e6:>10.1f}us {growth}")
                previous = (build, run)
        print("(growth: the per-node time at this size over the one at the size before; "
              "1.0 is linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
