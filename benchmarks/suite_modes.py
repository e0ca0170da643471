"""`python -m benchmarks.suite_modes`: what isolation and xdist cost.
docs/isolation.md, "Isolation".

The ci profile against one implementation (the fast one by default), run in turn:
- in process (`--in-process`, unprotected: the old way, the baseline);
- in a worker process (the default);
- served over the JSON-lines protocol (`cmd:python -m gradient_conformance serve ...`);
- in a worker, under xdist on two processes (`-n 2`).

It prints each run's wall time, its ratio to the baseline, and its pytest summary line, one
run after the other on the same machine. Figures, not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import sys

from gradient_conformance.conformance.commands.suite import in_subprocess


def modes(impl: str) -> dict[str, list[str]]:
    return {
        "in process": [f"--impl={impl}", "--in-process"],
        "worker": [f"--impl={impl}"],
        "served (cmd:)": [f"--impl=cmd:{sys.executable} -m gradient_conformance serve {impl}"],
        "worker, -n 2": [f"--impl={impl}", "-n", "2"],
    }


def run(args: list[str], profile: str, extra: list[str]) -> tuple[float, str]:
    done = in_subprocess([*args, f"--profile={profile}", "-q", "-p", "no:cacheprovider",
                          *extra])
    lines = done.output.strip().splitlines()
    return done.seconds, lines[-1] if lines else f"exit {done.code}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite_modes")
    parser.add_argument("--impl", default="gradient_conformance.implementations.fast")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--only", action="append", default=None,
                        help="run only these modes (repeatable)")
    parser.add_argument("--max-examples", default=None, help="instead of the profile's")
    args = parser.parse_args(argv)
    extra = [f"--max-examples={args.max_examples}"] if args.max_examples else []
    chosen = {k: v for k, v in modes(args.impl).items() if not args.only or k in args.only}
    print(f"the {args.profile} profile against {args.impl}, one mode after the other")
    baseline = None
    for name, mode in chosen.items():
        seconds, summary = run(mode, args.profile, extra)
        baseline = baseline or seconds
        print(f"{name:<16} {seconds:7.1f} s  {seconds / baseline:5.2f}x   {summary}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
