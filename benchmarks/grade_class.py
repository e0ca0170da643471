"""`python -m benchmarks.grade_class`: a synthetic class graded at --jobs 1 and --jobs 2, the
time per submission and in all, and the class page's common causes against the faults the
class was built from. docs/grading.md, "Time".

The class: each seeded fault of the fast implementation (implementations/faults), each
`--copies` times (a class makes the same mistake more than once), the fast implementation
itself, a submission that crashes at build, and the tape students of tests/impls (a
depth-first walk, numpy's sum past eight, an entry of derivative zero passing nothing on).
Figures, not a test: the machine's two cores are shared by the runs and their sandboxes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def synthetic_class(folder: pathlib.Path, copies: int) -> dict[str, str]:
    """The class in `folder`; each submission's id -> the fault it was built with."""
    from gradient_conformance.implementations.faults import FAULTS
    made = {}
    folder.mkdir(parents=True)
    for name in FAULTS:
        for k in range(copies):
            ident = f"{name.replace('_', '-')}-{k + 1}"
            (folder / f"{ident}.py").write_text(
                "from gradient_conformance.implementations.faults import seeded\n"
                f"build, NAME, VERSION, CAPABILITIES = seeded({name!r})\n")
            made[ident] = name
    (folder / "fast.py").write_text(
        "from gradient_conformance.implementations.fast import *  # noqa: F403\n")
    made["fast"] = ""
    (folder / "crash.py").write_text("def build(source):\n    return source.no_such\n")
    made["crash"] = "AttributeError"
    for fault in ("depth_first", "numpy_sum", "zero_passes_nothing"):
        student = folder / f"tape-{fault.replace('_', '-')}"
        student.mkdir()
        shutil.copy(ROOT / "tests" / "impls" / "tape_student.py", student)
        (student / "impl.py").write_text(
            "from tape_student import backprop_with\n\n\n"
            f"def backprop(tape):\n    return backprop_with(tape, {fault!r})\n")
        made[student.name] = f"tape {fault}"
    return made


def grade(folder: pathlib.Path, out: pathlib.Path, how: list[str], extra: list[str]) -> float:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "grade", str(folder),
                          "--out", str(out), "--module", "impl", *how, *extra],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"grade failed ({run.returncode}): {run.stderr[-2000:]}")
    return time.monotonic() - started


def causes_of(out: pathlib.Path) -> list:
    """The class page's common causes (reports.grading.causes, as the page lists them), from
    the reports and problems a run of grade wrote to `out`."""
    from gradient_conformance.reports.grading import causes
    from gradient_conformance.reports.records import from_json
    ran = json.loads((out / "grade.json").read_text())["submissions"]
    runs = {}
    for ident, said in ran.items():
        kept = out / "submissions" / ident / "report.json"
        runs[ident] = (None if said["problem"] else from_json(kept.read_text()),
                       said["problem"])
    return causes(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--jobs", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--dask", action="store_true", help="and on a local Dask cluster of "
                        "two single-threaded workers (the [cluster] extra)")
    parser.add_argument("--keep", default=None, metavar="DIR", help="write the class and "
                        "its results here (default: a temporary folder, removed)")
    parser.add_argument("extra", nargs="*", help="more arguments for grade (-k ...)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        # A temporary folder only where --keep names none: it goes when the runs end.
        where = pathlib.Path(args.keep or stack.enter_context(tempfile.TemporaryDirectory()))
        folder = where / "class"
        made = synthetic_class(folder, args.copies)
        asked = f"grade {' '.join(args.extra)}" if args.extra else "the whole ci profile"
        print(f"a class of {len(made)} submissions; {asked}", flush=True)
        runs = [(f"--jobs {j}", ["--jobs", str(j)], where / f"out-{j}") for j in args.jobs]
        for label, how, out in runs:
            _timed(label, out, grade(folder, out, how, args.extra), len(made))
        if args.dask:
            from benchmarks.cluster_rate import local_cluster
            out = where / "out-dask"
            (where / "dask-logs").mkdir(exist_ok=True)
            with local_cluster(where / "dask-logs", 2) as (address, _):
                seconds = grade(folder, out, ["--scheduler", address], args.extra)
            _timed("Dask, 2 workers", out, seconds, len(made))
            runs.append(("Dask", [], out))
        last = runs[-1][2]
        scores = [(r[0], (r[2] / "scores.csv").read_text()) for r in runs]
        if len(scores) > 1:  # one run is identical to nothing
            print("scores.csv identical across the runs: "
                  f"{all(text == scores[0][1] for _, text in scores)}")
        listed = causes_of(last)
        print("\nthe class page's common causes (the last run's):")
        for cause in listed:
            named = f" [{cause.name}]" if cause.name else ""
            print(f"  {cause.says}{named}: {len(cause.submissions)} of {len(made)}")
        print("\neach fault the class was built from, and the causes its submissions are "
              "counted under:")
        found: dict[str, list[str]] = {ident: [] for ident in made}
        for cause in listed:
            for ident in cause.submissions:
                found[ident].append(cause.name or cause.says)
        for fault in sorted(set(made.values())):
            ids = [i for i, f in made.items() if f == fault]
            said = sorted({", ".join(found[i]) or "(none)" for i in ids})
            print(f"  {fault or '(no fault)'} x{len(ids)}: {' | '.join(said)}")


def _timed(label: str, out: pathlib.Path, seconds: float, n: int) -> None:
    ran = json.loads((out / "grade.json").read_text())
    each = [s["seconds"] for s in ran["submissions"].values()]
    print(f"{label}: {seconds:.0f} s in all, {seconds / n:.1f} s a submission; each run "
          f"{min(each):.0f} to {max(each):.0f} s (mean {sum(each) / len(each):.1f})",
          flush=True)


if __name__ == "__main__":
    main()
