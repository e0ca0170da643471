"""`gradient-conformance fuzz`: the suite's generated checks, run continuously, in K processes
or as tasks on a Dask cluster. docs/fuzzing.md, "Fuzzing" and "Fuzzing on a cluster".

Each process or task is the suite itself: a pytest session of the installed checks (and of
any check files given), with the plugin, against the implementation, whose test loop runs the
generated checks (those Hypothesis drives) in turn, each for a batch of examples, until the
time is up (commands/fuzz_workers.py). A new check in conformance/checks/ is fuzzed as soon as
it is there. Each check's record (the suite's own, conformance/totals.py) comes back to this
driver, which adds them up as the suite does, keeps the smallest divergence of each signature
on disk at once (a JSON record and a case file, each written to a temporary name and
renamed), shows progress, and writes the HTML report at the end and on Ctrl-C. A run killed
with SIGKILL loses nothing already written.

On disk, under OUT/divergences/: one folder per signature (its hash), and in it one JSON
record and one case file per divergence found, named by size, smallest first. A run into an
OUT that holds a store goes on from it: a signature stored before is written again only by a
smaller case. OUT/history.jsonl has a line per run (its signatures among them), and the report
says which divergences are new since the previous run of the same implementation, and which
were fixed.

The Hypothesis database persists between runs (by default in OUT/database/): each check first
replays what earlier runs found, then generates. A directory on a shared filesystem, or a
Redis server (redis://HOST:PORT/DB, with the `redis` package), shares it between machines.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import pathlib
import sys
import time

from gradient_conformance.conformance.commands.fuzz_workers import (
    connect,
    in_processes,
    on_cluster,
    open_database,
)
from gradient_conformance.conformance.commands.suite import (
    confinement_of,
    contained,
    load_implementation,
    suite_arguments,
)
from gradient_conformance.conformance.divergence import save, write_atomically
from gradient_conformance.conformance.options import add_containment
from gradient_conformance.conformance.totals import Totals
from gradient_conformance.reports.html import render
from gradient_conformance.reports.records import (
    Divergence,
    Report,
    counted,
    divergence_from_dict,
    divergence_to_dict,
    loads,
    representatives,
    smallest_per_signature,
    to_json,
    visible,
)

PROGRESS_EVERY = 5.0  # seconds between progress lines


def signature_folder(d: Divergence) -> str:
    return hashlib.sha256(json.dumps(list(d.signature)).encode()).hexdigest()[:16]


def save_divergence(d: Divergence, folder: pathlib.Path) -> pathlib.Path:
    """The JSON record, beside the case file `save` wrote into `folder`."""
    stem = pathlib.Path(d.case_name).stem if d.case_name else "case"
    path = folder / f"{d.statements:04d}-{stem}.json"
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(divergence_to_dict(d), indent=1))
    return path


RECORD_BYTES = 16 << 20  # a stored record larger than this is not one the driver wrote


def stored(out: pathlib.Path, problems: list[str] | None = None) -> list[Divergence]:
    """Every divergence record in the store under `out` (a fuzz run's OUT or its
    divergences/). A file that is not a record the driver could have written (too large, a
    link, not JSON, the wrong shape) is left out, and said in `problems`."""
    root = out / "divergences" if (out / "divergences").is_dir() else out
    found = []
    for path in sorted(root.glob("*/*.json")):
        try:
            if path.is_symlink() or not path.is_file():
                raise ValueError("not a plain file")
            if path.stat().st_size > RECORD_BYTES:
                raise ValueError(f"larger than {RECORD_BYTES >> 20} MiB")
            found.append(divergence_from_dict(loads(path.read_bytes())))
        except (OSError, ValueError, UnicodeDecodeError) as problem:
            if problems is not None:
                problems.append(f"{path}: left out of the store, {problem}")
    return found


def read_history(out: pathlib.Path) -> list[dict]:
    """The lines of OUT/history.jsonl, oldest first; a line cut short by a kill, or not of
    the shape the driver writes, is left out."""
    return _runs(_history_text(out))


def _history_text(out: pathlib.Path) -> str:
    path = out / "history.jsonl"
    if not path.is_file() or path.is_symlink():
        return ""
    with open(path, "rb") as f:
        return f.read(HISTORY_BYTES).decode("utf-8", "replace")


HISTORY_BYTES = 64 << 20
_HISTORY_FIELDS = {"started": str, "impl": str, "spec": str, "implementation": str,
                   "where": str, "signatures": dict}


def _runs(text: str) -> list[dict]:
    runs = []
    for line in text.splitlines():
        try:
            run = loads(line)
        except ValueError:
            continue
        if isinstance(run, dict) and all(isinstance(run.get(k, kind()), kind)
                                         for k, kind in _HISTORY_FIELDS.items()) and all(
                isinstance(k, str) and isinstance(v, str)
                for k, v in run.get("signatures", {}).items()):
            runs.append(run)
    return runs


class Progress:
    """What the driver knows: the run's totals (as the suite adds them up), the smallest
    divergence of each signature, kept on disk under `out` as it arrives (beside what an
    earlier run stored there), and the failures of processes or tasks. `where` says what ran
    the cases, for the report."""

    def __init__(self, out: pathlib.Path | None = None, spec: str = "",
                 where: str = "1 process"):
        self.started, self.clock = datetime.datetime.now(datetime.UTC), time.monotonic()
        self.out, self.spec, self.where = out, spec, where
        self.totals = Totals()
        self.best: dict[tuple, Divergence] = {}  # of the signatures this run found
        self.problems: list[str] = []  # what could not be read back, said in the report
        self.stored = {d.signature: d for d in smallest_per_signature(
            stored(out, self.problems))} if out is not None else {}
        self.interrupted = False
        self.implementation: dict = {}
        self.checks: list[str] | None = None  # the generated checks the sessions run
        self.found = 0
        self.fresh: list[Divergence] = []  # signatures first seen in this run, not yet said
        self.exits: list[int] = []
        self.failures: list[str] = []
        self.confinement = None  # how the implementation is contained when fuzz loads it

    def take(self, message) -> None:
        sender, kind, *body = message
        if not body:
            return
        if kind == "hello" and isinstance(body[0], dict) and all(
                isinstance(body[0].get(k, ""), str) for k in ("name", "version", "spec")):
            self.implementation = body[0]
        elif kind == "checks" and isinstance(body[0], list) and all(
                isinstance(c, str) for c in body[0]):
            self.checks = body[0]
        elif kind == "done" and type(body[0]) is int:
            self.exits.append(body[0])
        elif kind == "failed":
            self.failures.append(f"{sender}: {visible(str(body[0]))[:4000]}")
        elif kind == "note":
            self.problems.append(visible(str(body[0]))[:4000])
        elif kind == "record":
            try:
                found = self.totals.take(body[0])
            except ValueError as problem:
                self.problems.append(f"a record from fuzzing process or task {sender} left "
                                     f"out: {problem}")
                return
            for d in found:
                self.found += 1
                self._keep(d)

    def _keep(self, d: Divergence) -> None:
        if d.signature not in self.best:
            self.fresh.append(d)
        held = self.best.get(d.signature) or self.stored.get(d.signature)
        if held is not None and (held.statements, len(held.source)) <= (d.statements,
                                                                        len(d.source)):
            self.best[d.signature] = held
            return
        self.best[d.signature] = d
        if self.out is not None:
            folder = self.out / "divergences" / signature_folder(d)
            save(d, folder, self.spec)
            save_divergence(d, folder)

    def unfinished(self) -> str:
        """Why this run is no verdict, though nobody stopped it ("" when it is one): it ran
        no case at all, or a session failed or ended with an error."""
        total = sum(self.totals.cases.values())
        why = []
        if not total:
            why.append(f"no check ran a case in {time.monotonic() - self.clock:.0f} s, so "
                       "nothing was compared (a session that took the whole time to start, "
                       "or every draw left out)")
        failed = len(self.failures) + sum(code not in (0, 1, 5) for code in self.exits)
        if failed:
            why.append(f"{failed} fuzzing session{'s' if failed > 1 else ''} failed or ended "
                       "with an error (said above), so the checks ran only so far")
        return "; ".join(why)

    def idle(self) -> list[str]:
        """A warning for each check the sessions were to run that ran no case and was not
        skipped: a fuzz run whose check found nothing because it ran nothing must not read as a
        clean one."""
        elapsed = time.monotonic() - self.clock
        return [f"warning: {c} ran no case in {elapsed:.0f} s" for c in self.checks or []
                if not self.totals.cases.get(c) and c not in self.totals.skips]

    def line(self) -> str:
        elapsed = time.monotonic() - self.clock
        total = sum(self.totals.cases.values())
        per_check: dict[str, int] = {}
        shown = representatives(list(self.best.values()))
        for d in shown:
            per_check[d.check] = per_check.get(d.check, 0) + 1
        found = ", ".join(f"{c.removeprefix('test_')} {n}" for c, n in sorted(per_check.items()))
        return (f"fuzz {int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}  {total} cases  "
                f"{total / max(elapsed, 1e-9):.1f}/s  {self.counts()}"
                f"{' (shown per check: ' + found + ')' if found else ''}")

    def counts(self) -> str:
        """The run's three counts, named the same on the terminal and in the report:
        divergences found (every failing case reported), their signatures, and those shown
        (the smallest of each signature whose ops no simpler one's explain)."""
        shown = representatives(list(self.best.values()))
        return (f"{counted(self.found, 'divergence')} found, "
                f"{counted(len(self.best), 'signature')}, {len(shown)} shown")

    def said(self) -> list[str]:
        """The lines of each signature first seen since the last call: what differs, its
        diagnosis, its location and the command that replays it."""
        lines = []
        for d in self.fresh:
            held = self.best.get(d.signature, d)
            lines.append(f"new signature: {d.key}"
                         + (" (stored by an earlier run)" if d.signature in self.stored
                            else ""))
            summary = held.summary.splitlines()
            lines += [f"  {line}" for line in (summary[0] if summary else "",
                                                held.diagnosis_line, held.location_line,
                                                f"replay:    {held.replay}" if held.replay
                                                else "") if line]
        self.fresh = []
        return lines

    def signatures(self) -> dict[str, str]:
        """This run's signatures: each one's store folder, and its text."""
        return {signature_folder(d): d.key for d in self.best.values()}

    def history_line(self) -> dict:
        """This run, as a line of OUT/history.jsonl."""
        return {"started": self.started.isoformat(timespec="seconds"),
                "seconds": round(time.monotonic() - self.clock, 1), "impl": self.spec,
                "implementation": self.implementation.get("name", ""), "where": self.where,
                "cases": sum(self.totals.cases.values()), "found": self.found,
                "signatures": self.signatures()}

    def changes(self, history: list[dict]) -> dict:
        """What is new since the previous run of this implementation in `history`, and what
        this run did not find again ("unseen", among the checks it ran), by signature: each
        signature's text, keyed by its store folder. Empty for a first run."""
        # `spec`: what lines written before 2026-12-05 called the --impl they ran.
        previous = next((run for run in reversed(history)
                         if run.get("impl", run.get("spec")) == self.spec), None)
        if previous is None:
            return {}
        now, then = self.signatures(), previous.get("signatures", {})
        ran = set(self.totals.cases)  # a check this run did not run fixed nothing
        return {"previous": previous.get("started", ""),
                "new": {k: now[k] for k in sorted(set(now) - set(then))},
                "unseen": {k: then[k] for k in sorted(set(then) - set(now))
                           if then[k].split(" / ")[0] in ran}}

    def report(self, changes: dict | None = None) -> Report:
        shown = representatives(list(self.best.values()))
        distinct: dict[str, int] = {}
        for d in shown:
            distinct[d.check] = distinct.get(d.check, 0) + 1
        cases = self.totals.cases
        checks = {c: {"cases": n, "failed": distinct.get(c, 0)} for c, n in cases.items()}
        skipped = {c: sorted(why)[0] for c, why in self.totals.skips.items()}
        for c in skipped:
            checks.setdefault(c, {})["skipped"] = 1
        elapsed = time.monotonic() - self.clock
        total = sum(cases.values())
        notes = [f"A fuzz run: {self.where}, {total} cases in {elapsed:.0f} s "
                 f"({total / max(elapsed, 1e-9):.1f} per second); {self.counts()}: shown, "
                 "the smallest of each signature, and of those only the ones whose ops no "
                 "simpler one's explain ('also seen as' lists the rest). 'failed' counts "
                 "those shown."]
        notes += [f"{c} skipped: {why}" for c, why in sorted(skipped.items())]
        notes += self.idle()
        notes += self.problems
        # Named by its spec until a session says more (none may have started).
        implementation = self.implementation or {"name": self.spec, "version": "",
                                                 "spec": self.spec, "capabilities": {}}
        return Report(implementation=implementation, profile="fuzz",
                      started=self.started.isoformat(timespec="seconds"), seconds=elapsed,
                      checks=checks, cases=dict(cases), ops=self.totals.ops,
                      ulps=self.totals.ulps,
                      divergences=shown, notes=notes, changes=changes or {},
                      interrupted=(f"interrupted (Ctrl-C) after {elapsed:.0f} s of the "
                                   "minutes asked for: the checks ran only so far"
                                   if self.interrupted else self.unfinished()))


def fuzz(spec: str, *, minutes: float, jobs: int = 1, out: pathlib.Path,
         report: pathlib.Path | None = None, database: str | None = "default",
         checks: list[str] | None = None, batch: int = 50, rounds: int | None = None,
         timeout: float = 20.0, paths: tuple[str, ...] = (), scheduler: str | None = None,
         contained: tuple[str, ...] = (), task_seconds: float = 60.0,
         tasks: int | None = None, log=sys.stderr, confinement=None) -> Progress:
    """Fuzz `spec` for `minutes` in `jobs` processes, or as tasks of `task_seconds` on the
    Dask cluster at `scheduler` (`tasks` of them at most), with the installed checks and
    those in `paths`; write the
    report (and its JSON beside it) and a line of history at the end, and on
    KeyboardInterrupt. Returns what it saw; ValueError for a check that is not there."""
    out.mkdir(parents=True, exist_ok=True)
    if database == "default":
        database = str(out / "database")
    open_database(database)  # a bad --database fails here, before any process starts
    if scheduler is not None:
        # The tasks run elsewhere: every path they are given must not depend on where.
        spec, database = _absolute(spec) or spec, _absolute(database)
        paths = tuple(_absolute(p) or p for p in paths)
    arguments = suite_arguments([f"--impl={spec}", f"--case-timeout={timeout}", "--profile=dev",
                                 "-p", "no:cacheprovider", "-q",
                                 f"--cases-out={out / 'divergences'}", *contained, *paths])
    loop = dict(deadline=time.time() + 60 * minutes, batch=batch, rounds=rounds,
                database=database, checks=checks)
    client = connect(scheduler) if scheduler is not None else None
    # Named the same however it was given, so that runs from elsewhere compare in the history.
    progress = Progress(out, _absolute(spec) or spec, f"tasks on the Dask cluster at {scheduler}"
                        if scheduler else f"{jobs} process{'es' if jobs > 1 else ''}")
    progress.confinement = confinement  # what the rechecks at the end load it under
    shown = time.monotonic()

    def take(message) -> None:
        progress.take(message)
        for line in progress.said():
            print(line, file=log, flush=True)
        if message[1] == "failed":
            print(f"fuzzing process or task {message[0]} failed: {message[2]}", file=log,
                  flush=True)
        refused = _refusal(progress, checks)
        if refused:
            raise _Refused(refused)

    def tick() -> None:
        nonlocal shown
        if time.monotonic() - shown >= PROGRESS_EVERY:
            shown = time.monotonic()
            print(progress.line(), file=log, flush=True)

    refused = ""
    try:
        if client is None:
            in_processes(jobs, arguments, loop, take, tick)
        else:
            on_cluster(client, arguments, loop, take, tick, task_seconds=task_seconds, log=log,
                       tasks=tasks)
    except _Refused as why:
        refused = str(why)
    except KeyboardInterrupt:
        progress.interrupted = True
        print("interrupted: writing the report", file=log, flush=True)
    finally:
        if not refused:
            _end(progress, out, report, timeout, log)
    if refused or (progress.exits and not progress.totals.outcomes and
                   any(code not in (0, 5) for code in progress.exits)):
        raise ValueError(refused or f"the suite did not start in the fuzzing processes (pytest "
                         f"exit {progress.exits[0]}; its error is above)")
    return progress


class _Refused(Exception):
    """The run cannot go on: a check asked for is not there."""


def _absolute(spec: str | None) -> str | None:
    """A path of this machine, absolute; a module name, cmd:..., redis://... as they are."""
    if spec is None or not pathlib.Path(spec).exists():
        return spec
    return str(pathlib.Path(spec).resolve())


def _end(progress: Progress, out: pathlib.Path, report: pathlib.Path | None, timeout: float,
         log) -> None:
    """The run's last line, its report (with what changed since the previous run) and its
    line of history."""
    from gradient_conformance.conformance.explain import verdict_lines
    print(progress.line(), file=log, flush=True)
    shown = representatives(list(progress.best.values()))
    if shown:
        # The report's summary of diagnoses, in the words the suite's own verdict uses.
        print(f"verdict over the {len(shown)} shown:", file=log, flush=True)
        for line in verdict_lines(shown):
            print(f"  {line}", file=log, flush=True)
    for problem in [*progress.idle(), *progress.problems]:
        print(problem, file=log, flush=True)
    if not progress.interrupted and progress.unfinished():
        print(f"no verdict: {progress.unfinished()}", file=log, flush=True)
    earlier = _history_text(out)
    changes = progress.changes(_runs(earlier))
    if changes:
        changes = _rechecked(changes, progress, timeout)
        print(f"since the previous run ({changes['previous']}): {len(changes['new'])} new, "
              f"{len(changes['fixed'])} fixed, {len(changes['still'])} not found again but "
              "still diverging", file=log, flush=True)
    if report is not None:
        write_report(progress.report(changes), report)
        print(f"report written: {report}", file=log, flush=True)
    line = json.dumps(progress.history_line()) + "\n"
    if earlier and not earlier.endswith("\n"):
        line = "\n" + line  # after a line cut short by a kill, on a line of its own
    with open(out / "history.jsonl", "a") as history:
        history.write(line)


def _rechecked(changes: dict, progress: Progress, timeout: float) -> dict:
    """Not finding a divergence again does not make it fixed: the smallest stored case of
    each signature this run did not see is replayed. It is fixed if the implementation now
    agrees; still diverging if not; and left unseen when there is no stored case to replay
    (the store was emptied) or the implementation cannot be loaded here.
    docs/fuzzing.md, "History"."""
    from gradient_conformance.conformance.commands.replay import replay
    cases = {signature_folder(d): d for d in progress.stored.values() if d.case_name}
    fixed: list[str] = []
    still: list[str] = []
    unseen: list[str] = []
    impl = None
    try:
        for folder, text in changes["unseen"].items():
            d = cases.get(folder)
            path = progress.out / "divergences" / folder / d.case_name \
                if d and progress.out else None
            if path is None or not path.is_file():
                unseen.append(text)
                continue
            impl = impl or load_implementation(progress.spec, timeout, progress.confinement)
            agrees, _ = replay(impl, str(path))
            (fixed if agrees else still).append(text)
    except (OSError, ValueError):
        unseen = list(changes["unseen"].values())
        fixed, still = [], []
    finally:
        if impl is not None:
            impl.close()
    return {"previous": changes["previous"], "new": sorted(changes["new"].values()),
            "fixed": sorted(fixed), "still": sorted(still), "unseen": sorted(unseen)}


def _refusal(progress: Progress, checks: list[str] | None) -> str:
    """Why the run cannot go on (a check asked for that is not there), or ""."""
    if progress.checks is None:
        return ""
    unknown = sorted(set(checks or ()) - set(progress.checks))
    if unknown:
        return f"no such check: {unknown[0]} (generated checks: {', '.join(progress.checks)})"
    if not progress.checks:
        return "no generated check was collected: nothing to fuzz"
    return ""


def report_from_folders(folders: list[pathlib.Path]) -> Report:
    """A report of the divergences saved under `folders` (each a fuzz run's OUT or its
    divergences/): for collecting the runs of several machines, or rereading a run killed
    before it wrote its report. Cases per check are not on disk, so they are not shown."""
    problems: list[str] = []
    found = [d for folder in folders for d in stored(folder, problems)]
    shown = representatives(found)
    checks: dict[str, dict[str, int]] = {}
    for d in shown:
        checks.setdefault(d.check, {"failed": 0})["failed"] += 1
    notes = [f"Collected from {', '.join(map(str, folders))}: "
             f"{counted(len(found), 'divergence')} saved, "
             f"{counted(len(smallest_per_signature(found)), 'signature')}, {len(shown)} shown.",
             *problems]
    return Report(implementation={"name": "(collected)", "version": "", "spec": "",
                                  "capabilities": {}}, profile="fuzz", checks=checks,
                  divergences=shown, notes=notes)


def write_report(report: Report, path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, render(report))
    write_atomically(path.with_suffix(".json"), to_json(report))


def add_parser(commands) -> None:
    parser = commands.add_parser("fuzz", help="run the generated checks continuously")
    parser.add_argument("--impl", required=True)
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--jobs", type=int, default=None, help="processes (default 1)")
    parser.add_argument("--out", default="fuzz-out", help="where divergences, the database and "
                      "the report go (default fuzz-out/)")
    parser.add_argument("--report", default=None, help="the HTML report (default OUT/report.html)")
    parser.add_argument("--database", default="default", help="the Hypothesis example database: "
                      "a folder (default OUT/database), redis://HOST:PORT/DB, or none")
    parser.add_argument("--check", dest="checks", action="append", default=None,
                      help="fuzz only this check (repeatable); default all")
    parser.add_argument("--batch", type=int, default=50,
                      help="Hypothesis examples per check before the next check's turn")
    parser.add_argument("--rounds", type=int, default=None,
                      help="stop after this many batches of each check (default: --minutes)")
    parser.add_argument("--case-timeout", type=float, default=20.0)
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="run the cases as tasks on this Dask scheduler's workers (needs "
                        "the [cluster] extra), instead of in --jobs processes here")
    parser.add_argument("--task-seconds", type=float, default=60.0,
                        help="with --scheduler: how long each task fuzzes (default 60)")
    parser.add_argument("--tasks", type=int, default=None,
                        help="with --scheduler: end after this many tasks, each running "
                        "--rounds batches of each check when given (default: --minutes)")
    add_containment(parser.add_argument, "--")
    parser.add_argument("paths", nargs="*", metavar="CHECK_FILE",
                        help="check files of your own to fuzz beside the installed ones")


def run(args) -> int:
    if (args.jobs is not None and args.jobs < 1) or args.minutes <= 0 or args.task_seconds <= 0:
        raise ValueError("--jobs must be at least 1, and --minutes and --task-seconds more "
                         "than 0")
    if args.tasks is not None and (args.scheduler is None or args.tasks < 1):
        raise ValueError("--tasks is a count of tasks on a cluster: give it with --scheduler, "
                         "and at least 1")
    if args.scheduler is not None:
        if args.jobs is not None:
            raise ValueError("with --scheduler the cluster's workers run the cases: --jobs "
                             "does not apply")
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise ValueError("--scheduler needs Dask's distributed package: pip install "
                             "'gradient-conformance[cluster]'") from None
    # Decided once, here (docs/isolation.md, "Decided once"): every session and task is
    # handed the decision, and a sandbox that then cannot start is an error, never a run
    # without one. A usage error now, rather than in every worker.
    confinement = confinement_of(args).resolved()
    load_implementation(args.impl, args.case_timeout, confinement).close()
    out = pathlib.Path(args.out)
    report = pathlib.Path(args.report) if args.report else out / "report.html"
    progress = fuzz(args.impl, minutes=args.minutes, jobs=args.jobs or 1, out=out,
                    report=report, database=args.database, checks=args.checks,
                    batch=args.batch, rounds=args.rounds, timeout=args.case_timeout,
                    paths=tuple(args.paths), scheduler=args.scheduler,
                    task_seconds=args.task_seconds, tasks=args.tasks,
                    contained=contained(args, confinement.sandbox), confinement=confinement)
    if progress.interrupted:
        return 2  # as pytest's own exit status for an interrupted run
    # docs/fuzzing.md, "Fuzzing": a run that compared nothing, or whose sessions did not end
    # as they should, is no verdict, and never exits 0.
    return 1 if progress.best or progress.unfinished() else 0


def add_report_parser(commands) -> None:
    parser = commands.add_parser("report", help="one report of the divergences that fuzz "
                                  "runs saved (several machines' OUT folders, say)")
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--out", required=True, help="the HTML report (JSON beside it)")


def run_report(args) -> int:
    folders = [pathlib.Path(f) for f in args.folders]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise ValueError(f"no such folder: {missing[0]}")
    report = report_from_folders(folders)
    write_report(report, pathlib.Path(args.out))
    print(f"{len(report.divergences)} divergences shown ({report.notes[0]}); report written: "
          f"{args.out}")
    return 1 if report.divergences else 0

