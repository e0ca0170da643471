"""`gradient-conformance grade SUBMISSIONS --out DIR`: every submission of a class through
the suite, scored by a rubric in the spec's terms. docs/grading.md, "Grading a class".

SUBMISSIONS is a folder, each of its entries one submission: a `.py` file (its name without
.py is the submission's id), or a folder (its name is the id) holding the implementation as
its one top-level `.py` file, or as the file `--module` names; or it is a TOML manifest,
`[submissions]` with `ID = "SPEC"` lines, each SPEC an --impl (a `cmd:` program for another
language, a path relative to the manifest). Each submission runs the suite in a process of
its own, contained as any run is (docs/isolation.md; a folder submission's own folder is
bound, read-only, so that its modules import each other), with the same profile, the same
checks and the same cases as every other (the ci profile is derandomized), in parallel
(`--jobs`) or as tasks on a Dask cluster (`--scheduler`). A submission that crashes, hangs
or attacks ends its own run; the scores and pages are written from the reports read back as
data.

DIR gets, per submission, `submissions/ID/`: its report (HTML, JSON, case files) and
Gradescope's `results.json`; and `scores.csv` (the gradebook), `class.html` (the class page:
the distribution, each area, the common causes) and `grade.json` (what was run, and how).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import pathlib
import re
import sys
import time

from gradient_conformance.conformance.commands.suite import (
    confinement_of,
    contained,
    in_subprocess,
)
from gradient_conformance.conformance.divergence import write_atomically
from gradient_conformance.conformance.options import PROFILES, add_containment, budget_seconds
from gradient_conformance.reports.grading import (
    class_page,
    default_rubric,
    gradebook,
    load_rubric,
    results_json,
    scores,
    total,
)
from gradient_conformance.reports.records import Report

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
SUBMISSION_TIMEOUT = 1800.0  # seconds a submission's whole run may take, by default
# Seconds a submission's run may spend reducing and explaining its divergences, by default: a
# first draft diverges in many checks, and a suite run's own 600 s, once per student, would
# make the class's time the failure stage's. Past it a divergence is reported as found.
STAGE_BUDGET = 60.0


def submissions(where: pathlib.Path, module: str | None = None) \
        -> dict[str, tuple[str, tuple[str, ...]]]:
    """id -> (its --impl, the paths bound for it), sorted by id: from a folder of
    submissions or a TOML manifest. ValueError naming what is wrong."""
    if not where.exists():
        raise ValueError(f"{where}: no such folder or manifest")
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    if where.is_file():
        import tomllib
        try:
            listed = tomllib.loads(where.read_text(encoding="utf-8")).get("submissions")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as problem:
            raise ValueError(f"{where}: not a TOML manifest: {problem}") from None
        if not isinstance(listed, dict) or not listed:
            raise ValueError(f"{where}: a manifest is a [submissions] table of ID = \"SPEC\"")
        for ident, spec in listed.items():
            if not isinstance(spec, str) or not spec:
                raise ValueError(f"{where}: {ident} = {spec!r}: give the --impl as a string")
            if not spec.startswith("cmd:") and spec.endswith(".py"):
                spec = str((where.parent / spec).resolve())
            found[_checked_id(ident, where)] = (spec, ())
        return dict(sorted(found.items()))
    for entry in sorted(where.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_file() and entry.suffix == ".py":
            found[_checked_id(entry.stem, entry)] = (str(entry.resolve()), ())
        elif entry.is_dir():
            found[_checked_id(entry.name, entry)] = (str(_module_of(entry, module)),
                                                     (str(entry.resolve()),))
    if not found:
        raise ValueError(f"{where}: no submission in it (a .py file or a folder each)")
    return found


def _checked_id(ident: str, where) -> str:
    if not _ID.fullmatch(ident):
        raise ValueError(f"{where}: {ident!r} is no submission id: letters, digits, '.', "
                         "'_' and '-', at most 80, from a letter or digit")
    return ident


def _module_of(folder: pathlib.Path, module: str | None) -> pathlib.Path:
    if module is not None:
        path = folder / f"{module}.py"
        if not path.is_file():
            raise ValueError(f"{folder}: no {module}.py in it (--module)")
        return path.resolve()
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith(("_", "test_")))
    if len(files) != 1:
        raise ValueError(f"{folder}: {len(files)} .py files at its top level "
                         f"({', '.join(p.name for p in files) or 'none'}): name the "
                         "implementation's module with --module")
    return files[0].resolve()


def grade_one(ident: str, spec: str, bound: tuple[str, ...], out: pathlib.Path,
              suite_args: tuple[str, ...], timeout: float) -> tuple[Report | None, str, float]:
    """One submission's run of the suite, in a process of its own: (its report, read back
    and checked, or None; what went wrong; seconds). Its reports go to out/submissions/ID/."""
    folder = out / "submissions" / ident
    folder.mkdir(parents=True, exist_ok=True)
    argv = [f"--impl={spec}", *suite_args, "-q", "-p", "no:cacheprovider",
            f"--report={folder / 'report.html'}", *(f"--sandbox-bind={b}" for b in bound)]
    started = time.monotonic()
    try:
        done = in_subprocess(argv, report_json=folder / "report.json", timeout=timeout)
    except Exception as problem:  # noqa: BLE001 - a timeout, or a process that would not start
        return None, f"did not finish: {type(problem).__name__}: {problem}"[:300], \
            time.monotonic() - started
    if done.code not in (0, 1) or done.report is None:
        tail = " ".join(done.output.strip().splitlines()[-3:])[-300:]
        return None, f"exit status {done.code}: {tail}", done.seconds
    return done.report, "", done.seconds


def grade(found: dict[str, tuple[str, tuple[str, ...]]], out: pathlib.Path, *, rubric,
          suite_args: tuple[str, ...], jobs: int = 1, scheduler: str | None = None,
          timeout: float = SUBMISSION_TIMEOUT, names: bool = False, log=sys.stderr) -> dict:
    """Every submission graded, and the class's files written; what was run, as data."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, tuple[Report | None, str]] = {}
    seconds: dict[str, float] = {}

    def finished(ident: str, report: Report | None, problem: str, took: float) -> None:
        runs[ident], seconds[ident] = (report, problem), took
        said = problem if report is None else f"{len(report.divergences)} divergences"
        print(f"grade: {ident}: {said} ({took:.0f} s)", file=log, flush=True)
    if scheduler is not None:
        from gradient_conformance.conformance.commands.fuzz_workers import connect
        client = connect(scheduler)
        try:
            futures = {client.submit(grade_one, ident, spec, bound, out, suite_args, timeout,
                                     pure=False): ident
                       for ident, (spec, bound) in found.items()}
            for future, result in _as_completed(client, futures):
                finished(futures[future], *result)
        finally:
            client.close()
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(grade_one, ident, spec, bound, out, suite_args, timeout):
                       ident for ident, (spec, bound) in found.items()}
            for future in concurrent.futures.as_completed(futures):
                finished(futures[future], *future.result())
    rows = []
    for ident in found:  # the order of the ids, whatever order the runs ended in
        report, problem = runs[ident]
        area_scores = scores(report, rubric)
        rows.append((ident, area_scores))
        said = "" if report is None else (
            f"{len(report.divergences)} divergences; the whole report: report.html")
        write_atomically(out / "submissions" / ident / "results.json", json.dumps(
            results_json(area_scores, seconds=seconds[ident], problem=problem, said=said),
            indent=1))
    about = (f"Every submission ran the suite {' '.join(suite_args)}: the same checks and "
             f"the same cases for each (a derandomized profile draws the same ones every "
             f"run). Scored by {rubric.source}.")
    write_atomically(out / "scores.csv", gradebook(rows, rubric))
    write_atomically(out / "class.html", class_page(rows, runs, rubric, about=about,
                                                    names=names))
    ran = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "suite": list(suite_args), "rubric": rubric.source,
           "areas": [{"name": a.name, "points": a.points, "visibility": a.visibility}
                     for a in rubric.areas],
           "submissions": {i: {"score": total(r),
                               "problem": runs[i][1], "seconds": round(seconds[i], 1)}
                           for i, r in rows},
           "seconds": round(time.monotonic() - started, 1),
           "jobs": jobs if scheduler is None else None, "scheduler": scheduler}
    write_atomically(out / "grade.json", json.dumps(ran, indent=1))
    return ran


def _as_completed(client, futures):
    from distributed import as_completed
    for future in as_completed(list(futures)):
        try:
            yield future, future.result()
        except Exception as problem:  # noqa: BLE001 - a task the cluster lost: its own result
            yield future, (None, f"its task failed on the cluster: {problem}"[:300], 0.0)


def add_parser(commands) -> None:
    parser = commands.add_parser("grade", help="every submission of a class through the "
                                 "suite, scored by a rubric: Gradescope's results.json, a "
                                 "gradebook CSV and a class page")
    parser.add_argument("submissions", help="a folder of submissions (a .py file or a "
                        "folder each), or a TOML manifest of ID = \"SPEC\"")
    parser.add_argument("--out", required=True, help="the folder to write the results to")
    parser.add_argument("--rubric", default=None, metavar="RUBRIC.toml",
                        help="points per area (docs/grading.md); default: 10 each")
    parser.add_argument("--module", default=None, help="the implementation's module in each "
                        "submission's folder (default: its one top-level .py file)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions run at once")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="run the submissions as tasks on this Dask scheduler's workers "
                        "(needs gradient-conformance[cluster]; the workers must see the "
                        "submissions and --out at the same paths)")
    parser.add_argument("--names", action="store_true", help="name the submissions on the "
                        "class page (anonymous ids by default)")
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--max-examples", type=int, default=None)
    parser.add_argument("-k", dest="select", default=None, metavar="EXPRESSION",
                        help="only the checks pytest's -k EXPRESSION selects")
    parser.add_argument("--case-timeout", type=float, default=20.0)
    parser.add_argument("--stage-budget", type=budget_seconds, default=STAGE_BUDGET,
                        metavar="SECONDS",
                        help="the seconds a submission's run may spend reducing and "
                        f"explaining its divergences (default {STAGE_BUDGET:g}; past it a "
                        "divergence is reported as found)")
    parser.add_argument("--submission-timeout", type=float, default=SUBMISSION_TIMEOUT,
                        help="the seconds a submission's whole run may take (default 1800)")
    add_containment(parser.add_argument, "--")


def run(args) -> int:
    if args.jobs < 1 or (args.max_examples is not None and args.max_examples < 1) or \
            args.submission_timeout <= 0 or args.case_timeout <= 0:
        raise ValueError("--jobs and --max-examples must be at least 1, and the timeouts "
                         "more than 0 seconds")
    if args.scheduler is not None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise ValueError("--scheduler needs Dask's distributed package: pip install "
                             "'gradient-conformance[cluster]'") from None
    from gradient_conformance.conformance.commands.checks import areas
    checks = areas()
    rubric = default_rubric(checks) if args.rubric is None else load_rubric(
        pathlib.Path(args.rubric).read_text(encoding="utf-8"), args.rubric, checks)
    found = submissions(pathlib.Path(args.submissions), args.module)
    # Decided once, here (docs/isolation.md, "Decided once"): every submission's run is
    # handed the decision, never `auto`; the memory limit shared among the runs at once.
    suite_args = (f"--profile={args.profile}", f"--case-timeout={args.case_timeout:g}",
                  f"--stage-budget={args.stage_budget:g}",
                  *((f"--max-examples={args.max_examples}",) if args.max_examples else ()),
                  *(("-k", args.select) if args.select else ()),
                  *contained(args, confinement_of(args).resolved().sandbox))
    ran = grade(found, pathlib.Path(args.out), rubric=rubric, suite_args=suite_args,
                jobs=args.jobs, scheduler=args.scheduler, timeout=args.submission_timeout,
                names=args.names)
    unfinished = [i for i, s in ran["submissions"].items() if s["problem"]]
    print(f"graded {len(ran['submissions'])} submissions in {ran['seconds']:.0f} s; "
          f"{len(unfinished)} without a report; the class page: "
          f"{pathlib.Path(args.out) / 'class.html'}")
    return 0
