"""`python -m benchmarks.first_answer`: how soon a student sees an answer, and how small it is.
docs/benchmarks.md, "Benchmarks".

Three figures, each from runs of the installed command in processes of their own, from a
scratch folder:

- start-up: from starting `gradient-conformance` to its first case (a probe plugin, given
  with -p, notes when pytest starts the first check), against the bundled implementation;
- the first readable divergence: from starting the command against a seeded fault to the
  last line (`replay:`) of the first divergence printed as found, with and without -x, and
  the whole run's time beside it;
- the statements of the reported programs over every bundled seeded fault: each program
  divergence's statements as reported (after the reducer) and as the check found it (the
  report keeps that program when the reducer removed statements), their medians.

Figures, not a test: they depend on the machine and its load. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import pkgutil
import statistics
import subprocess
import sys
import tempfile
import time

FAST = "gradient_conformance.implementations.fast"
FAULTS = "gradient_conformance.implementations.faults"

PROBE = '''
import os, time
T0 = float(os.environ["FIRST_ANSWER_T0"])
_first = []
def pytest_runtest_logstart(nodeid, location):
    if not _first:
        _first.append(1)
        with open(os.environ["FIRST_ANSWER_OUT"], "w") as out:
            out.write(str(time.time() - T0))
'''


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gradient_conformance", *args]


def start_up(folder: pathlib.Path, runs: int) -> list[float]:
    """Seconds from starting the command to its first case, `runs` times."""
    (folder / "first_answer_probe.py").write_text(PROBE)
    out = folder / "first.txt"
    seconds = []
    for _ in range(runs):
        env = {**os.environ, "PYTHONPATH": str(folder), "FIRST_ANSWER_OUT": str(out),
               "FIRST_ANSWER_T0": repr(time.time())}
        subprocess.run(_command(f"--impl={FAST}", "-p", "first_answer_probe", "-q", "-k",
                                "case_file"), cwd=folder, env=env, capture_output=True,
                       check=False, timeout=600)
        seconds.append(float(out.read_text()))
    return seconds


def first_divergence(folder: pathlib.Path, fault: str, *extra: str) -> tuple[float, float]:
    """(seconds to the first divergence's replay line on the terminal, seconds of the run)."""
    started = time.monotonic()
    process = subprocess.Popen(_command(f"--impl={FAULTS}.{fault}", "-q", *extra), cwd=folder,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    first, seen = None, False
    assert process.stdout is not None
    for line in process.stdout:
        seen = seen or line.startswith("divergence found by")
        if seen and first is None and line.strip().startswith("replay:"):
            first = time.monotonic() - started
    process.wait()
    return (first if first is not None else float("nan")), time.monotonic() - started


def reported_statements(folder: pathlib.Path, fault: str, *extra: str) -> list[tuple[int, int]]:
    """(statements as the check found it, as reported) for each program divergence a run
    against `fault` reports."""
    report = folder / f"{fault}.json"
    subprocess.run(_command(f"--impl={FAULTS}.{fault}", "-q", f"--report-json={report}",
                            f"--cases-out={folder / fault}", *extra), cwd=folder,
                   capture_output=True, check=False, timeout=3600)
    if not report.exists():
        return []
    out = []
    for d in json.loads(report.read_text())["divergences"]:
        if d.get("case_name", "").endswith(".json") or not d.get("statements"):
            continue  # a tape's: its entries are the case
        original = d.get("original") or ""
        before = sum(1 for line in original.splitlines() if line.split("#")[0].strip()) \
            if original else d["statements"]
        out.append((before, d["statements"]))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="start-up runs (default 5)")
    parser.add_argument("--fault", default="recip_form",
                        help="the seeded fault of the time to a first divergence")
    parser.add_argument("--skip-statements", action="store_true",
                        help="leave out the statements over every fault (the long part)")
    parser.add_argument("--faults", nargs="*", default=None,
                        help="the seeded faults of the statements (default: every one)")
    parser.add_argument("--select", default=None,
                        help="only the checks -k EXPR selects, in every run (a quick look)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = pathlib.Path(scratch)
        seconds = start_up(folder, args.runs)
        print(f"start-up to the first case: median {statistics.median(seconds):.2f} s over "
              f"{len(seconds)} runs (min {min(seconds):.2f}, max {max(seconds):.2f})")
        chosen = ("-k", args.select) if args.select else ()
        for extra in ((), ("-x",)):
            first, whole = first_divergence(folder, args.fault, *chosen, *extra)
            print(f"first readable divergence against {args.fault}"
                  f"{' with -x' if extra else ''}: {first:.1f} s (the run: {whole:.1f} s)")
        if args.skip_statements:
            return
        faults = args.faults or sorted(m.name for m in pkgutil.iter_modules(
            [str(pathlib.Path(__file__).resolve().parent.parent / "implementations" /
                 "faults")]))
        pairs = []
        for fault in faults:
            found = reported_statements(folder, fault, *chosen)
            pairs += found
            print(f"  {fault}: {len(found)} program divergences, statements found -> "
                  f"reported: {', '.join(f'{b}->{a}' for b, a in found) or '-'}")
        if pairs:
            print(f"statements of the reported programs over {len(faults)} seeded "
                  f"fault{'s' if len(faults) != 1 else ''} "
                  f"({len(pairs)} program divergences): median "
                  f"{statistics.median(b for b, _ in pairs)} as the checks found them, "
                  f"{statistics.median(a for _, a in pairs)} reduced; max "
                  f"{max(b for b, _ in pairs)} -> {max(a for _, a in pairs)}")


if __name__ == "__main__":
    main()
