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
import os
import pathlib
import secrets
import subprocess
import sys
import time
import unicodedata
from typing import NamedTuple

from gradient_conformance.conformance.commands.suite import (
    confinement_of,
    contained,
    in_subprocess,
)
from gradient_conformance.conformance.divergence import write_atomically
from gradient_conformance.conformance.options import PROFILES, add_containment, budget_seconds
from gradient_conformance.reports.grading import (
    anonymous,
    class_page,
    default_rubric,
    gradebook,
    load_rubric,
    results_json,
    scores,
    total,
)
from gradient_conformance.reports.records import Report

NO_IMPLEMENTATION = "no implementation to load"  # a folder's problem, before its details
SUBMISSION_TIMEOUT = 1800.0  # seconds a submission's whole run may take, by default
# Seconds a submission's run may spend reducing and explaining its divergences, by default: a
# first draft diverges in many checks, and a suite run's own 600 s, once per student, would
# make the class's time the failure stage's. Past it a divergence is reported as found.
STAGE_BUDGET = 60.0


class Submission(NamedTuple):
    """One submission: its --impl, the paths bound into its sandbox, and what keeps it from
    running ("" when nothing does)."""

    spec: str
    bound: tuple[str, ...] = ()
    problem: str = ""


NOT_AN_ID = ("not a submission id (letters, digits, '.', '_', '-' and spaces within, at most "
             "80, from a letter or digit): rename it")


def submissions(where: pathlib.Path, module: str | None = None) \
        -> tuple[dict[str, Submission], dict[str, str]]:
    """(id -> its Submission, sorted by id; each entry left out -> why): from a folder of
    submissions or a TOML manifest. One student's entry stops no other's run: a folder whose
    implementation cannot be told is a Submission with that problem (graded 0, saying so);
    an entry whose name is no id is left out, saying why. ValueError naming what is wrong
    with the whole: no such folder, a manifest that is not one, no submission at all."""
    if not where.exists():
        raise ValueError(f"{where}: no such folder or manifest")
    found: dict[str, Submission] = {}
    left_out: dict[str, str] = {}
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
            found[_checked_id(ident, where)] = Submission(spec)
        return dict(sorted(found.items())), left_out
    for entry in sorted(where.iterdir()):
        if entry.name.startswith((".", "_")) or not (
                entry.is_dir() or (entry.is_file() and entry.suffix == ".py")):
            continue
        ident = unicodedata.normalize("NFC", entry.stem if entry.is_file() else entry.name)
        if not is_id(ident):
            left_out[entry.name] = NOT_AN_ID
        elif ident in found:
            left_out[entry.name] = f"another entry has the id {ident!r} too: rename one"
        else:
            try:  # its own entry's problem is said in its results, and stops no other's run
                found[ident] = Submission(str(entry.resolve())) if entry.is_file() else \
                    Submission(str(_module_of(entry, module)), (str(entry.resolve()),))
            except (ValueError, OSError, RuntimeError) as problem:  # a link to itself: Runtime
                said = str(problem).removeprefix(f"{entry}: ")
                found[ident] = Submission("", problem=f"{NO_IMPLEMENTATION}: {said}")
    if not found:
        raise ValueError(f"{where}: no submission in it (a .py file or a folder each)"
                         + "".join(f"; {name!r}: {why}" for name, why in left_out.items()))
    return dict(sorted(found.items())), left_out


def is_id(text: str) -> bool:
    """Whether `text` may be a submission's id (it names a folder of the results and a row
    of the gradebook, never a path): at most 80 characters of letters and marks of any
    script, digits, '.', '_', '-' and spaces within, from a letter or digit."""
    def kind(c: str) -> str:
        return unicodedata.category(c)[0]
    return 0 < len(text) <= 80 and kind(text[0]) in "LN" and not text[-1].isspace() and \
        all(kind(c) in "LMN" or c in "._- " for c in text)


def _checked_id(ident: str, where) -> str:
    if not is_id(ident):
        raise ValueError(f"{where}: {ident!r}: {NOT_AN_ID}")
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
    except subprocess.TimeoutExpired:  # its text is the command: paths that name the student
        return None, f"did not finish: its run took more than {timeout:g} s " \
            "(--submission-timeout)", time.monotonic() - started
    except Exception as problem:  # noqa: BLE001 - a process that would not start, or output
        return None, f"its run failed: {type(problem).__name__}: {problem}"[:300], \
            time.monotonic() - started
    if done.code not in (0, 1) or done.report is None:
        tail = " ".join(done.output.strip().splitlines()[-3:])[-300:]
        return None, f"exit status {done.code}: {tail}", done.seconds
    return done.report, "", done.seconds


def grade(found: dict[str, Submission], out: pathlib.Path, *, rubric,
          suite_args: tuple[str, ...], jobs: int = 1, scheduler: str | None = None,
          timeout: float = SUBMISSION_TIMEOUT, names: bool = False, log=sys.stderr,
          left_out: dict[str, str] | None = None) -> dict:
    """Every submission graded, and the class's files written; what was run, as data.
    `left_out`: the entries that were no submission, and why (recorded in grade.json)."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, tuple[Report | None, str]] = {}
    seconds: dict[str, float] = {}

    def finished(ident: str, report: Report | None, problem: str, took: float) -> None:
        runs[ident], seconds[ident] = (report, problem), took
        said = problem if report is None else f"{len(report.divergences)} divergences"
        print(f"grade: {ident}: {said} ({took:.0f} s)", file=log, flush=True)
    for ident, entry in found.items():
        if entry.problem:  # nothing to run: graded 0, saying why
            (out / "submissions" / ident).mkdir(parents=True, exist_ok=True)
            finished(ident, None, entry.problem, 0.0)
    runnable = {ident: entry for ident, entry in found.items() if not entry.problem}
    if scheduler is not None:
        from gradient_conformance.conformance.commands.fuzz_workers import connect
        client = connect(scheduler)
        try:
            futures = {client.submit(grade_one, ident, entry.spec, entry.bound, out,
                                     suite_args, timeout, pure=False): ident
                       for ident, entry in runnable.items()}
            for future, result in _as_completed(client, futures):
                finished(futures[future], *result)
        finally:
            client.close()
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(grade_one, ident, entry.spec, entry.bound, out, suite_args,
                                   timeout): ident for ident, entry in runnable.items()}
            for future in concurrent.futures.as_completed(futures):
                finished(futures[future], *future.result())
    rows = []
    for ident in found:  # the order of the ids, whatever order the runs ended in
        report, problem = runs[ident]
        area_scores = scores(report, rubric)
        rows.append((ident, area_scores))
        # No count of divergences: some may be in areas the students do not see yet.
        said = "" if report is None else \
            "Each area below: how many of its tests passed, and its first divergence."
        write_atomically(out / "submissions" / ident / "results.json", json.dumps(
            results_json(area_scores, seconds=seconds[ident], problem=problem, said=said),
            indent=1))
    # What decides the cases a derandomized profile draws: the checks, Hypothesis, Python.
    from gradient_conformance.conformance.session import versions as run_versions
    versions = run_versions()
    about = (f"Every submission ran the suite {' '.join(suite_args)} (gradient-conformance "
             f"{versions.get('gradient-conformance', '(not installed)')}, Hypothesis "
             f"{versions['hypothesis']}, "
             f"Python {versions['python']}): the same checks and the same cases for each, "
             "since the ci profile is derandomized (each check draws its cases from a seed "
             f"fixed by the check itself). Scored by {rubric.source}.")
    # The paths that name a student (its file or folder, its results' folder): on the
    # page, where a program quotes one, its anonymous id instead.
    paths = {ident: [p for p in (entry.spec, *entry.bound, str(out.resolve() / "submissions" /
                                                                 ident)) if os.path.isabs(p)]
             for ident, entry in found.items()}
    # The page's anonymous ids, in an order no class list undoes; kept for the staff.
    ids = anonymous(list(found), secrets.token_hex(16))
    write_atomically(out / "scores.csv", gradebook(rows, rubric))
    write_atomically(out / "class.html", class_page(rows, runs, rubric, about=about,
                                                    names=names, paths=paths, ids=ids))
    ran = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "suite": list(suite_args), "versions": versions, "rubric": rubric.source,
           "areas": [{"name": a.name, "points": a.points, "visibility": a.visibility}
                     for a in rubric.areas],
           "submissions": {i: {"score": total(r),
                               "problem": runs[i][1], "seconds": round(seconds[i], 1)}
                           for i, r in rows},
           "anonymous": {} if names else ids, "left_out": dict(left_out or {}),
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
    parser.add_argument("submissions", nargs="?", default=None, help="a folder of "
                        "submissions (a .py file or a folder each), or a TOML manifest of "
                        "ID = \"SPEC\"")
    parser.add_argument("--out", default=None, help="the folder to write the results to")
    parser.add_argument("--gradescope", default=None, metavar="ROOT", help="grade the one "
                        "submission in ROOT/submission (Gradescope's /autograder) and always "
                        "write ROOT/results/results.json, instead of SUBMISSIONS and --out")
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
    # Only a derandomized profile: every submission must face the same cases.
    parser.add_argument("--profile", default="ci", choices=sorted(
        name for name, chosen in PROFILES.items() if chosen.get("derandomize")))
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
    if args.gradescope is not None:
        return _on_gradescope(args, pathlib.Path(args.gradescope))
    if args.submissions is None or args.out is None:
        raise ValueError("give SUBMISSIONS and --out, or --gradescope ROOT alone")
    return _graded(args, pathlib.Path(args.submissions), pathlib.Path(args.out))


def _on_gradescope(args, root: pathlib.Path) -> int:
    """Gradescope's contract (docs/grading.md, "On Gradescope"): the submission in
    ROOT/submission, graded as one of a class, its results.json written to ROOT/results/
    whatever happens after the options are read: a problem of the submission scores 0 and
    says why (exit 0); one of the autograder's setup (a bad rubric, no submission folder,
    SUBMISSIONS or --out given too) says so to the student too, and is a usage error (exit
    2); anything else, the same, and the error as the command reports it."""
    import tempfile
    results, ident = root / "results", "submission"  # the class of one: its id
    graded = results / "conformance" / "submissions" / ident / "results.json"
    try:
        results.mkdir(parents=True, exist_ok=True)
        if args.submissions is not None or args.out is not None:
            raise ValueError("--gradescope ROOT grades ROOT/submission into ROOT/results: "
                             "give neither SUBMISSIONS nor --out with it")
        if not (root / "submission").is_dir():
            raise ValueError(f"{root / 'submission'}: no such folder: Gradescope puts the "
                             "submission there")
        with tempfile.TemporaryDirectory() as tmp:
            (pathlib.Path(tmp) / "class").mkdir()
            (pathlib.Path(tmp) / "class" / ident).symlink_to(
                (root / "submission").resolve(), target_is_directory=True)
            _graded(args, pathlib.Path(tmp) / "class", results / "conformance")
        text = graded.read_text(encoding="utf-8")
    except Exception as problem:
        try:
            write_atomically(results / "results.json", json.dumps(results_json(
                [], seconds=0.0, problem=f"The autograder could not grade this submission: "
                f"{type(problem).__name__}: {problem}. Tell the course's staff."), indent=1))
        except OSError:
            pass  # nowhere to write it: the command's own error is all there is
        raise
    write_atomically(results / "results.json", text)
    return 0


def _graded(args, where: pathlib.Path, out: pathlib.Path) -> int:
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
    from gradient_conformance.conformance.areas import area_names
    known = area_names()
    rubric = default_rubric(known) if args.rubric is None else load_rubric(
        pathlib.Path(args.rubric).read_text(encoding="utf-8"), args.rubric, known)
    if rubric.left_out:  # by design, and yet a rubric written for other areas may mean them
        print(f"grade: {rubric.source} gives no points to the areas "
              f"{', '.join(rubric.left_out)} (their tests run, and count for nothing)",
              file=sys.stderr)
    found, left_out = submissions(where, args.module)
    for name, why in left_out.items():
        print(f"grade: {name!r} left out: {why}", file=sys.stderr)
    # Decided once, here (docs/isolation.md, "Decided once"): every submission's run is
    # handed the decision, never `auto`; the memory limit shared among the runs at once.
    sandbox = confinement_of(args).resolved().sandbox
    if sandbox == "none" and args.sandbox == "auto":
        print("grade: bubblewrap cannot make a sandbox here, so each submission runs without "
              "one, as this user, in a process of its own (docs/isolation.md); "
              "--sandbox=bwrap refuses to grade instead", file=sys.stderr)
    suite_args = (f"--profile={args.profile}", f"--case-timeout={args.case_timeout:g}",
                  f"--stage-budget={args.stage_budget:g}",
                  *((f"--max-examples={args.max_examples}",) if args.max_examples else ()),
                  *(("-k", args.select) if args.select else ()),
                  *contained(args, sandbox))
    ran = grade(found, out, rubric=rubric, suite_args=suite_args,
                jobs=args.jobs, scheduler=args.scheduler, timeout=args.submission_timeout,
                names=args.names, left_out=left_out)
    unfinished = [i for i, s in ran["submissions"].items() if s["problem"]]
    print(f"graded {len(ran['submissions'])} submissions in {ran['seconds']:.0f} s; "
          f"{len(unfinished)} without a report; "
          + (f"{len(left_out)} left out (each said above, with why); " if left_out else "")
          + f"the class page: {out / 'class.html'}")
    return 0
