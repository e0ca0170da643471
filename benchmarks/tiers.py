"""`python -m benchmarks.tiers [--first-only] [--out docs/tiers.md]`: the time of the project's
two tiers of tests as CI runs them (`make test`, then `make slow`), written dated, with the
commit and the machine that made them. README, "The tiers"; docs/benchmarks.md, "Benchmarks".

Figures are generated, never written by hand: this script is the only writer of the file.
For each tier it keeps the make command's wall time (installs included), pytest's own closing
line and time, the ten slowest tests and the tier's total as tests/conftest.py reports them
(each test's whole protocol, summed over the workers), and the figures the tests measured
(the containment tests' among them); every test's seconds go beside each tier's log
(out/tier-NAME.json), to see where a tier's time goes. Run it on a fresh clone, quiet, for
figures to compare with CI's 90 minutes: run from the checkout (`python3 -m
benchmarks.tiers`), it needs no venv, since `make test` creates the one it runs the tests in,
and the package's own __init__.py (`without_paths`) imports only the standard library.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

from gradient_conformance import without_paths

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "tiers.md"
TIERS = [("first", "make test"), ("second", "make slow")]
TIMED = re.compile(r" *[\d.]+ s  ")  # a line of seconds, not pytest's closing line after it


def sections(output: str) -> dict[str, list[str]]:
    """The lines of each `=== title ===` section pytest's terminal summary printed."""
    found: dict[str, list[str]] = {}
    title = None
    for line in output.splitlines():
        heading = re.fullmatch(r"=+ (.+?) =+", line.strip())
        if heading:
            title = heading.group(1)
            found.setdefault(title, [])
        elif title is not None:
            found[title].append(line)
    return found


def summary(output: str) -> str:
    """pytest's closing line: counts and time."""
    lines = [line.strip("= ") for line in output.splitlines()
             if re.search(r"\b(passed|failed|error)\b.* in [\d.]+s", line)]
    return lines[-1] if lines else "(no closing line: see the log)"


def run_tier(command: str, log: pathlib.Path) -> tuple[int, float, str]:
    """The tier's make command, its output written to `log` as it runs (to watch it)."""
    started = time.perf_counter()
    # Every test's seconds beside the log (tests/conftest.py writes them there).
    env = {**os.environ, "GRADIENT_CONFORMANCE_TEST_SECONDS": str(log.with_suffix(".json"))}
    with log.open("w") as out:
        code = subprocess.run(command.split(), cwd=ROOT, stdout=out, env=env,
                              stderr=subprocess.STDOUT).returncode
    return code, time.perf_counter() - started, log.read_text(errors="replace")


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tiers")
    parser.add_argument("--first-only", action="store_true", help="time `make test` alone")
    parser.add_argument("--out", default=str(OUT), help="the file to write (docs/tiers.md)")
    parser.add_argument("--logs", default=str(ROOT / "out"), help="where each tier's log goes")
    args = parser.parse_args(argv)
    logs = pathlib.Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# The tiers' time", "",
             f"A generated record: written by `python -m benchmarks.tiers"
             f"{' --first-only' if args.first_only else ''}` on {when}, from commit {commit}, "
             f"on {platform.machine()} with {os.cpu_count()} cores, as user "
             f"{'root' if os.geteuid() == 0 else os.geteuid()}"
             f"{', under CI' if os.environ.get('CI') else ''}. Each tier is its make command "
             "(installs included in its wall time); pytest's line is its own. The slowest "
             "tests are each test's whole protocol (setup, call, teardown; tests/conftest.py).",
             ""]
    total, status = 0.0, 0
    for name, command in TIERS[:1] if args.first_only else TIERS:
        code, seconds, output = run_tier(command, logs / f"tier-{name}.log")
        total += seconds
        status = status or code
        parts = sections(output)
        slowest = next((v for k, v in parts.items() if "slowest tests" in k), [])
        costliest = next((v for k, v in parts.items() if "costliest test functions" in k), [])
        figures = parts.get("figures measured by the tests", [])
        lines += [f"## The {name} tier: `{command}`", "",
                  f"- wall time: {minutes(seconds)} (exit {code})",
                  f"- pytest: {summary(output)}", "", "The slowest tests:", "", "```",
                  *[line for line in slowest if TIMED.match(line)], "```", ""]
        if costliest:
            lines += ["The costliest test functions, their parametrizations summed:", "",
                      "```", *[line for line in costliest if TIMED.match(line)], "```", ""]
        if figures:
            lines += ["Figures the tests measured:", "", "```",
                      *[line for line in figures if line.strip()], "```", ""]
    lines += [f"Both tiers: {minutes(total)}." if not args.first_only else "", ""]
    pathlib.Path(args.out).write_text(without_paths("\n".join(lines).rstrip() + "\n", ROOT))
    print(f"written: {args.out} ({minutes(total)}, exit {status})", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
