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
import html
import json
import pathlib
import re
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


def grade(folder: pathlib.Path, out: pathlib.Path, jobs: int, extra: list[str]) -> float:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "grade", str(folder),
                          "--out", str(out), "--jobs", str(jobs), "--module", "impl", *extra],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"grade failed ({run.returncode}): {run.stderr[-2000:]}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("extra", nargs="*", help="more arguments for grade (-k ...)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp) / "class"
        made = synthetic_class(folder, args.copies)
        print(f"a class of {len(made)} submissions")
        for jobs in args.jobs:
            out = pathlib.Path(tmp) / f"out-{jobs}"
            seconds = grade(folder, out, jobs, args.extra)
            ran = json.loads((out / "grade.json").read_text())
            each = [s["seconds"] for s in ran["submissions"].values()]
            print(f"--jobs {jobs}: {seconds:.0f} s in all, {seconds / len(made):.1f} s a "
                  f"submission; each run {min(each):.0f} to {max(each):.0f} s "
                  f"(mean {sum(each) / len(each):.1f})")
        page = (out / "class.html").read_text()
        print("\nthe class page's common causes (the last run's):")
        for cause in re.findall(r"<h3>(.*?)</h3>", page):
            print(f"  {html.unescape(re.sub('<[^>]+>', '', cause))}")
        print("\nbuilt from:")
        for fault in sorted(set(made.values())):
            print(f"  {fault or '(none)'}: {sum(v == fault for v in made.values())}")


if __name__ == "__main__":
    main()
