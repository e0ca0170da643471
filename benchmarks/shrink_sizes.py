"""`python -m benchmarks.shrink_sizes`: how small the counterexamples that Hypothesis shrinks
to are. docs/benchmarks.md, "Benchmarks"; docs/generators.md, "Generators".

A report is worth what its program is: the fewer statements, the sooner a reader sees the
bug. For each of two seeded faults whose divergence shows only in some programs (recip's
share in another op form, the shares folded in reverse), and each seed, Hypothesis searches
`differentiable_programs()` for a case where the fault's bits differ from the reference's,
and shrinks it. Each search runs in an interpreter of its own: Hypothesis mixes the
constants of the modules imported so far into its draws, so a seed means one search only in
a fresh process (tests/test_generators.py says more). It prints the statements of each
shrunk program, their median, and how many seeds found none. Figures, not a test: a
shrinker's result is a local minimum that depends on where the search starts.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

FAULTS = ("recip_form", "reversed_fold")


def shrunk(fault: str, seed: int, examples: int) -> str:
    """The source of the program the search with this seed shrinks to, or "" if none
    showed the fault."""
    import importlib

    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as seeded

    from gradient_conformance import reference
    from gradient_conformance.generators import differentiable_programs
    from gradient_conformance.reference.cases import same_bits

    faulty = importlib.import_module(f"gradient_conformance.implementations.faults.{fault}")
    found = []

    def outputs(run, case):
        return run({k: v.copy() for k, v in case.buffers.items()})

    @settings(max_examples=examples, database=None, deadline=None, report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    @seeded(seed)
    @given(differentiable_programs())
    def search(case):
        want = outputs(reference.build(case.source), case)
        got = outputs(faulty.build(case.source), case)
        if any(not same_bits(want[k], got[k]) for k in want):
            found.append(case.source)
            raise AssertionError("the fault shows")

    try:
        search()
    except AssertionError:
        pass
    return found[-1] if found else ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shrink_sizes")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--fault", action="append", choices=FAULTS, dest="faults")
    parser.add_argument("--one", nargs=2, metavar=("FAULT", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(shrunk(args.one[0], int(args.one[1]), args.examples), end="")
        return 0
    for fault in args.faults or FAULTS:
        sizes = []
        for seed in range(1, args.seeds + 1):
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.shrink_sizes", "--one", fault, str(seed),
                 "--examples", str(args.examples)], capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            sizes.append(len(done.stdout.splitlines()) if done.stdout else None)
        shown = [s for s in sizes if s is not None]
        median = f"{statistics.median(shown):g}" if shown else "-"
        print(f"{fault:14} statements shrunk to, seeds 1-{args.seeds}: "
              f"{' '.join(str(s) if s else '-' for s in sizes)}; median {median}, "
              f"none found {sizes.count(None)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
