"""`python -m conformance fuzz`: the suite's generated checks, run continuously in K processes.
SPEC.md, "Fuzzing".

Each worker is the suite itself: a pytest session of the installed checks (and of any check
files given), with the plugin, against the implementation, whose test loop (`FuzzLoop`) runs
the generated checks (those Hypothesis drives) in turn, each for a batch of examples, until
the time is up. A new check in conformance/checks/ is fuzzed as soon as it is there. Each
check's record (the suite's own, conformance/totals.py) goes to the parent, which adds them
up as the suite does, keeps the smallest divergence of each signature on disk at once (a
JSON record and a case file, each written to a temporary name and renamed), shows progress,
and writes the HTML report at the end and on Ctrl-C. A run killed with SIGKILL loses
nothing already written.

On disk, under OUT/divergences/: one folder per signature (its hash), and in it one JSON
record and one case file per divergence the workers found, named by size, smallest first.

The Hypothesis database persists between runs (by default in OUT/database/): each check first
replays what earlier runs found, then generates. A directory on a shared filesystem, or a
Redis server (redis://HOST:PORT/DB, with the `redis` package), shares it between machines.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import multiprocessing
import os
import pathlib
import queue as queues
import signal
import sys
import time

import pytest

from gradient_conformance.conformance import plugin
from gradient_conformance.conformance.commands.suite import load_implementation, suite_arguments
from gradient_conformance.conformance.divergence import save, write_atomically
from gradient_conformance.conformance.totals import Totals
from gradient_conformance.reports.html import render
from gradient_conformance.reports.records import (
    Divergence,
    Report,
    divergence_to_dict,
    representatives,
    smallest_per_signature,
    to_json,
)

PROGRESS_EVERY = 5.0  # seconds between progress lines


def open_database(spec: str | None):
    """A Hypothesis example database from `--database`: none, redis://..., or a folder."""
    from hypothesis.database import DirectoryBasedExampleDatabase
    if spec is None or spec == "none":
        return None
    if spec.startswith("redis://"):
        try:
            import redis
        except ImportError:
            raise ValueError("--database redis://... needs the redis package: pip install "
                             "'gradient-conformance[redis]'") from None
        from hypothesis.extra.redis import RedisExampleDatabase
        return RedisExampleDatabase(redis.Redis.from_url(spec))
    return DirectoryBasedExampleDatabase(spec)


def signature_folder(d: Divergence) -> str:
    return hashlib.sha256(json.dumps(list(d.signature)).encode()).hexdigest()[:16]


def save_divergence(d: Divergence, folder: pathlib.Path) -> pathlib.Path:
    """The JSON record, beside the case file `save` wrote into `folder`."""
    stem = pathlib.Path(d.case_name).stem if d.case_name else "case"
    path = folder / f"{d.statements:04d}-{stem}.json"
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(divergence_to_dict(d), indent=1))
    return path


class FuzzLoop:
    """A pytest plugin that runs the suite's session as a fuzzer: it keeps the generated
    checks (those Hypothesis drives) and, in place of pytest's test loop, runs them in turn,
    a batch of examples each, until `deadline` (or for `rounds` batches each), sending each
    check's record through `send`."""

    def __init__(self, send, *, deadline: float, batch: int, rounds: int | None,
                 database: str | None, checks: list[str] | None):
        self.send, self.deadline, self.batch, self.rounds = send, deadline, batch, rounds
        self.database, self.checks = database, checks

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        generated = [i for i in items if plugin.is_check(i) and
                     hasattr(getattr(i, "obj", None), "hypothesis")]
        names = sorted({plugin.check_name(i) for i in generated})
        self.send("checks", names)
        items[:] = [i for i in generated if not self.checks or plugin.check_name(i) in
                    self.checks]

    def pytest_sessionstart(self, session):
        run = session.config.stash[plugin.RUN_KEY]
        run.cases_dir = None  # the parent keeps the store
        impl = run.impl
        self.send("hello", {"name": impl.name, "version": impl.version, "spec": impl.spec,
                            "capabilities": impl.capabilities})

    def pytest_runtestloop(self, session):
        from _pytest.runner import runtestprotocol
        from hypothesis import HealthCheck, Phase, Verbosity, given, settings
        from hypothesis import strategies as st
        # Quiet: the falsifying examples are in the records, not on the terminal.
        base = dict(max_examples=self.batch, deadline=None, derandomize=False,
                    database=open_database(self.database), verbosity=Verbosity.quiet,
                    print_blob=False, suppress_health_check=list(HealthCheck))
        # Hypothesis binds settings when it wraps a test, so each check is wrapped afresh
        # from its inner test (the same database key as under pytest): once with the
        # database's replay, for the first batch, and once generating only, for the rest.
        batches = {}
        for item in session.items:
            inner = item.obj.hypothesis.inner_test
            batches[item] = [
                settings(**base)(given(data=st.data())(inner)),
                settings(phases=[Phase.generate, Phase.target, Phase.shrink], **base)(
                    given(data=st.data())(inner))]
        rounds = self.rounds
        while batches and time.time() < self.deadline and rounds != 0:
            rounds = None if rounds is None else rounds - 1
            for item in list(batches):
                if time.time() >= self.deadline:
                    break
                item.obj = batches[item][0]
                batches[item][:] = batches[item][-1:]
                for report in runtestprotocol(item, log=False, nextitem=None):
                    for name, value in report.user_properties:
                        if name == plugin.PROPERTY:
                            record = json.loads(value)
                            self.send("record", record)
                            if record["outcome"] == "skipped":
                                batches.pop(item, None)
        return True


def _worker(worker: int, arguments: list[str], loop: dict, messages) -> None:
    """One fuzzing process: the suite's session with a FuzzLoop. Every message to the
    parent starts with the worker's number."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    with open(os.devnull, "w") as quiet:
        os.dup2(quiet.fileno(), 1)  # pytest's own terminal lines: the parent shows progress
    code = 3
    try:
        code = int(pytest.main(arguments, plugins=[FuzzLoop(
            lambda *message: messages.put((worker, *message)), **loop)]))
    finally:
        messages.put((worker, "done", code))


class Progress:
    """What the parent knows: the run's totals (as the suite adds them up), the smallest
    divergence of each signature, kept on disk under `out` as it arrives."""

    def __init__(self, out: pathlib.Path | None = None, spec: str = ""):
        self.started, self.clock = datetime.datetime.now(datetime.UTC), time.monotonic()
        self.out, self.spec = out, spec
        self.totals = Totals()
        self.best: dict[tuple, Divergence] = {}
        self.implementation: dict = {}
        self.checks: list[str] | None = None  # the generated checks the workers collected
        self.found = 0
        self.exits: list[int] = []

    def take(self, message) -> None:
        _, kind, *body = message
        if kind == "hello":
            self.implementation = body[0]
        elif kind == "checks":
            self.checks = body[0]
        elif kind == "done":
            self.exits.append(body[0])
        elif kind == "record":
            d = self.totals.take(body[0])
            if d is not None:
                self.found += 1
                self._keep(d)

    def _keep(self, d: Divergence) -> None:
        held = self.best.get(d.signature)
        if held is not None and (held.statements, len(held.source)) <= (d.statements,
                                                                        len(d.source)):
            return
        self.best[d.signature] = d
        if self.out is not None:
            folder = self.out / "divergences" / signature_folder(d)
            save(d, folder, self.spec)
            save_divergence(d, folder)

    def line(self) -> str:
        elapsed = time.monotonic() - self.clock
        total = sum(self.totals.cases.values())
        per_check: dict[str, int] = {}
        shown = representatives(list(self.best.values()))
        for d in shown:
            per_check[d.check] = per_check.get(d.check, 0) + 1
        found = ", ".join(f"{c.removeprefix('test_')} {n}" for c, n in sorted(per_check.items()))
        return (f"fuzz {int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}  {total} cases  "
                f"{total / max(elapsed, 1e-9):.1f}/s  distinct divergences: "
                f"{len(shown)}{' (' + found + ')' if found else ''}, "
                f"{len(self.best)} signatures")

    def report(self, jobs: int) -> Report:
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
        notes = [f"A fuzz run: {jobs} processes, {total} cases in {elapsed:.0f} s "
                 f"({total / max(elapsed, 1e-9):.1f} per second); {self.found} divergences "
                 f"found, {len(self.best)} distinct signatures, shown as {len(shown)}: the "
                 "smallest of each signature, and of those only the ones whose ops no "
                 "simpler one's explain ('also seen as' lists the rest). 'failed' counts "
                 "those shown."]
        notes += [f"{c} skipped: {why}" for c, why in sorted(skipped.items())]
        return Report(implementation=self.implementation, profile="fuzz",
                      started=self.started.isoformat(timespec="seconds"), seconds=elapsed,
                      checks=checks, ops=self.totals.ops, ulps=self.totals.ulps,
                      divergences=shown, notes=notes)


def fuzz(spec: str, *, minutes: float, jobs: int = 1, out: pathlib.Path,
         report: pathlib.Path | None = None, database: str | None = "default",
         checks: list[str] | None = None, batch: int = 50, rounds: int | None = None,
         timeout: float = 20.0, paths: tuple[str, ...] = (), log=sys.stderr) -> Progress:
    """Fuzz `spec` for `minutes` in `jobs` processes, with the installed checks and those
    in `paths`; write the report (and its JSON beside it) at the end, and on
    KeyboardInterrupt. Returns what it saw; ValueError for a check that is not there."""
    out.mkdir(parents=True, exist_ok=True)
    if database == "default":
        database = str(out / "database")
    open_database(database)  # a bad --database fails here, before any process starts
    arguments = suite_arguments([f"--impl={spec}", f"--case-timeout={timeout}", "--profile=dev",
                                 "-p", "no:cacheprovider", "-q",
                                 f"--cases-out={out / 'divergences'}", *paths])
    loop = dict(deadline=time.time() + 60 * minutes, batch=batch, rounds=rounds,
                database=database, checks=checks)
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    workers = [context.Process(target=_worker, daemon=True, args=(k, arguments, loop, messages))
               for k in range(jobs)]
    progress = Progress(out, spec)
    refused = ""
    try:
        for w in workers:
            w.start()
        shown = time.monotonic()
        while len(progress.exits) < jobs and not refused:
            try:
                message = messages.get(timeout=1.0)
            except queues.Empty:
                if not any(w.is_alive() for w in workers):
                    break
                message = None
            if message is not None:
                progress.take(message)
                refused = _refusal(progress, checks)
            if time.monotonic() - shown >= PROGRESS_EVERY:
                shown = time.monotonic()
                print(progress.line(), file=log, flush=True)
    except KeyboardInterrupt:
        print("interrupted: writing the report", file=log, flush=True)
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
        with contextlib.suppress(Exception):
            while True:
                progress.take(messages.get_nowait())
        if not refused:
            print(progress.line(), file=log, flush=True)
            if report is not None:
                write_report(progress.report(jobs), report)
                print(f"report written: {report}", file=log, flush=True)
    if refused or (progress.exits and not progress.totals.outcomes and
                   any(code not in (0, 5) for code in progress.exits)):
        raise ValueError(refused or f"the suite did not start in the fuzzing processes (pytest "
                         f"exit {progress.exits[0]}; its error is above)")
    return progress


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
    from gradient_conformance.reports.records import divergence_from_dict
    found = []
    for folder in folders:
        root = folder / "divergences" if (folder / "divergences").is_dir() else folder
        found += [divergence_from_dict(json.loads(p.read_text()))
                  for p in sorted(root.glob("*/*.json"))]
    shown = representatives(found)
    checks: dict[str, dict[str, int]] = {}
    for d in shown:
        checks.setdefault(d.check, {"failed": 0})["failed"] += 1
    notes = [f"Collected from {', '.join(map(str, folders))}: {len(found)} saved divergences, "
             f"{len(smallest_per_signature(found))} signatures, shown as {len(shown)}."]
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
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
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
    parser.add_argument("paths", nargs="*", metavar="CHECK_FILE",
                        help="check files of your own to fuzz beside the installed ones")


def run(args) -> int:
    if args.jobs < 1 or args.minutes <= 0:
        raise ValueError("--jobs must be at least 1 and --minutes more than 0")
    # A usage error now, rather than in every worker.
    load_implementation(args.impl, args.case_timeout).close()
    out = pathlib.Path(args.out)
    report = pathlib.Path(args.report) if args.report else out / "report.html"
    progress = fuzz(args.impl, minutes=args.minutes, jobs=args.jobs, out=out, report=report,
                    database=args.database, checks=args.checks, batch=args.batch,
                    rounds=args.rounds, timeout=args.case_timeout, paths=tuple(args.paths))
    return 1 if progress.best else 0


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

