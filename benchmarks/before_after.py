"""The ci profile's wall time against one implementation, for this checkout and another
version of the package, in one run: `python -m benchmarks.before_after --before SITE
[--impl SPEC] [--rounds N]`. docs/benchmarks.md, "Benchmarks". It prints figures; it asserts
nothing.

SITE is a folder holding another version's `gradient_conformance` package (a wheel of an
earlier commit unpacked there, say); it goes first on PYTHONPATH, so that the same
interpreter and dependencies run both. The runs alternate, before then after, `--rounds`
times, so that a shared machine's drift falls on both alike, and the ratio printed is of the
medians.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time


def one_run(impl: str, site: str | None) -> float:
    """Seconds for `gradient-conformance --impl=IMPL --profile=ci`, run from an empty folder
    (no conftest, no database) with `site` first on the path; the run must pass."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if site:
        env["PYTHONPATH"] = site
    with tempfile.TemporaryDirectory() as here:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "gradient_conformance", f"--impl={impl}",
                               "--profile=ci", "-q", "-p", "no:cacheprovider"], cwd=here,
                              env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the run {'before' if site else 'after'} did not pass "
                         f"(exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a folder holding the other version "
                        "of the gradient_conformance package")
    parser.add_argument("--impl", default="gradient_conformance.implementations.fast")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not (pathlib.Path(args.before) / "gradient_conformance").is_dir():
        parser.error(f"--before: no gradient_conformance package in {args.before}")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    before, after = [], []
    for k in range(args.rounds):
        before.append(one_run(args.impl, args.before))
        after.append(one_run(args.impl, None))
        print(f"round {k + 1}: before {before[-1]:.1f} s, after {after[-1]:.1f} s",
              flush=True)
    b, a = statistics.median(before), statistics.median(after)
    print(f"the ci profile against {args.impl}: median {b:.1f} s before, {a:.1f} s after; "
          f"after / before = {a / b:.3f} ({args.rounds} rounds, alternating)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
