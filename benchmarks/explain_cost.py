"""`python -m benchmarks.explain_cost`: what explaining divergences adds to a run.
docs/diagnosis.md,
"Diagnosis".

The ci profile against faulty implementations (the seeded faults by default), one after the
other: each run's wall time, its divergences, and the seconds the explanation stage spent on
them (diagnosis and location, as each divergence's record measures them), with their share
of the run. Figures, not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile

from gradient_conformance.conformance.commands.suite import in_subprocess
from gradient_conformance.implementations.faults import FAULTS

PACKAGE = "gradient_conformance.implementations.faults"


def measure(impl: str, profile: str, folder: str, extra: list[str]) \
        -> tuple[float, int, float]:
    """(the run's seconds, its divergences, the seconds spent explaining them)."""
    report = f"{folder}/report.json"
    done = in_subprocess([f"--impl={impl}", f"--profile={profile}", "-q", "-p",
                          "no:cacheprovider", f"--report-json={report}", *extra])
    with open(report) as stream:
        divergences = json.load(stream)["divergences"]
    spent = sum(d["diagnosis"].get("seconds", 0.0) + d["location"].get("seconds", 0.0)
                for d in divergences)
    return done.seconds, len(divergences), spent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.explain_cost")
    parser.add_argument("--impl", action="append", default=None,
                        help="an implementation (repeatable; default: every seeded fault)")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--max-examples", default=None, help="instead of the profile's")
    args = parser.parse_args(argv)
    extra = [f"--max-examples={args.max_examples}"] if args.max_examples else []
    impls = args.impl or [f"{PACKAGE}.{name}" for name in sorted(FAULTS)]
    print(f"the {args.profile} profile against {len(impls)} faulty implementations, one "
          "after the other")
    shares = []
    for impl in impls:
        with tempfile.TemporaryDirectory() as folder:
            seconds, count, spent = measure(impl, args.profile, folder, extra)
        shares.append(spent / seconds)
        print(f"{impl.rsplit('.', 1)[-1]:<22} {seconds:7.1f} s  {count:3} divergences  "
              f"explained in {spent:6.2f} s  {100 * spent / seconds:5.1f}%", flush=True)
    print(f"explanation's share of a run: median {100 * statistics.median(shares):.1f}%, "
          f"largest {100 * max(shares):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
