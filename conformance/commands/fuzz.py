"""`python -m conformance fuzz`: the suite's generated checks, run continuously in K processes.
SPEC.md, "Fuzzing".

Each worker loads the implementation and runs the checks in turn, each for a batch of
Hypothesis examples. A failing batch ends with Hypothesis's shrunk counterexample, which the
worker turns into a divergence and writes to disk at once (a JSON record and a case file,
each written to a temporary name and renamed), before telling the parent. The parent shows
progress, keeps the smallest divergence of each signature, and writes the HTML report at the
end and on Ctrl-C. A run killed with SIGKILL loses nothing already written.

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
import pathlib
import queue as queues
import signal
import sys
import time
import traceback

from gradient_conformance.conformance.record import RECORDER, write_atomically
from gradient_conformance.reports.html import render
from gradient_conformance.reports.records import (
    Divergence,
    Report,
    divergence_from_dict,
    divergence_to_dict,
    representatives,
    smallest_per_signature,
    to_json,
)

# check name -> (module, test function): the suite's generated checks (case files are fixed,
# and have nothing to fuzz).
CHECKS = {
    "test_exact_programs_bit_for_bit": ("test_forward", "test_exact_programs_bit_for_bit"),
    "test_programs_with_transcendentals": ("test_forward",
                                           "test_programs_with_transcendentals"),
    "test_gradients_bit_for_bit": ("test_gradient_bits", "test_gradients_bit_for_bit"),
    "test_gradients_are_near_the_true_derivative": (
        "test_derivative", "test_gradients_are_near_the_true_derivative"),
    "test_shares_are_summed_in_arrival_order": ("test_accumulation",
                                                "test_shares_are_summed_in_arrival_order"),
    "test_invalid_gradients_are_rejected": ("test_rejection",
                                            "test_invalid_gradients_are_rejected"),
    "test_near_misses_are_accepted": ("test_rejection", "test_near_misses_are_accepted"),
    "test_tapes_bit_for_bit": ("test_tape", "test_tapes_bit_for_bit"),
    "test_tape_shares_are_summed_in_arrival_order": (
        "test_tape", "test_tape_shares_are_summed_in_arrival_order"),
    "test_tape_derivatives_are_near_the_true_derivative": (
        "test_tape", "test_tape_derivatives_are_near_the_true_derivative"),
    "test_invalid_tapes_are_rejected": ("test_tape", "test_invalid_tapes_are_rejected"),
}
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
    """The JSON record, beside the case file that `finish` already wrote into `folder`."""
    stem = pathlib.Path(d.case_file).stem if d.case_file else f"{d.statements:04d}"
    path = folder / f"{d.statements:04d}-{stem}.json"
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(divergence_to_dict(d), indent=1))
    return path


def _worker(worker: int, spec: str, out: str, database: str | None, deadline: float,
            batch: int, rounds: int | None, checks: list[str], messages,
            timeout: float) -> None:
    """One fuzzing process: load, then run the checks in turn until `deadline` (or for
    `rounds` batches each). Every message to the parent starts with the worker's number."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    import importlib

    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import strategies as st

    from gradient_conformance.conformance.implementation import Abandoned, load
    impl = load(spec, timeout=timeout)
    messages.put((worker, "hello", {"name": impl.name, "version": impl.version,
                                    "spec": impl.spec, "capabilities": impl.capabilities}))
    # Quiet: the falsifying examples are in the records, not on the terminal.
    base = dict(max_examples=batch, deadline=None, database=open_database(database),
                verbosity=Verbosity.quiet, print_blob=False,
                suppress_health_check=list(HealthCheck))
    # Hypothesis binds settings when it wraps a test, so each check is wrapped afresh from
    # its inner test (the same database key as under pytest): once with the database's
    # replay, for the first batch, and once generating only, for every later batch.
    first_settings = settings(**base)
    more_settings = settings(phases=[Phase.generate, Phase.target, Phase.shrink], **base)
    tests = {}
    for name in checks:
        module = importlib.import_module(
            f"gradient_conformance.conformance.checks.{CHECKS[name][0]}")
        needs = getattr(module, "PROTOCOL_FUNCTION", "build")
        if not impl.provides(needs):
            messages.put((worker, "skipped", name, f"the implementation defines no {needs}()"))
            continue
        inner = getattr(module, CHECKS[name][1]).hypothesis.inner_test
        tests[name] = [first_settings(given(data=st.data())(inner)),
                       more_settings(given(data=st.data())(inner))]
    smallest: dict[tuple, tuple[int, int]] = {}
    root = pathlib.Path(out) / "divergences"
    import pytest
    try:
        while tests and time.time() < deadline and rounds != 0:
            rounds = None if rounds is None else rounds - 1
            for name in list(tests):
                if time.time() >= deadline:
                    break
                RECORDER.begin(name, f"fuzz::{name}")
                impl.begin_check()
                failed, text = False, ""
                test, tests[name][:] = tests[name][0], tests[name][-1:]
                try:
                    test(impl=impl)
                except pytest.skip.Exception as skipped:
                    messages.put((worker, "skipped", name, str(skipped)))
                    del tests[name]
                except (Exception, Abandoned):  # noqa: BLE001 - a failed check is the find
                    failed, text = True, traceback.format_exc()
                d = RECORDER.finish(failed, text, impl_spec=spec)
                if d is not None and (d.statements, len(d.source)) < smallest.get(
                        d.signature, (10**9, 0)):
                    smallest[d.signature] = (d.statements, len(d.source))
                    RECORDER.save(d, root / signature_folder(d), spec)
                    save_divergence(d, root / signature_folder(d))
                    messages.put((worker, "divergence", divergence_to_dict(d)))
                messages.put((worker, "cases", name, RECORDER.cases, dict(RECORDER.ops)))
    finally:
        impl.close()
        messages.put((worker, "done"))


class Progress:
    """What the parent knows: cases per check, divergences per signature, per-op tallies."""

    def __init__(self, checks: list[str]):
        self.started, self.clock = datetime.datetime.now(datetime.UTC), time.monotonic()
        self.cases = dict.fromkeys(checks, 0)
        self.best: dict[tuple, Divergence] = {}
        self.ops: dict[str, dict[str, list[int]]] = {}  # op -> check -> [cases, divergences]
        self.implementation: dict = {}
        self.skipped: dict[str, str] = {}
        self.found = 0

    def take(self, message) -> None:
        _, kind, *body = message
        if kind == "hello":
            self.implementation = body[0]
        elif kind == "cases":
            self.cases[body[0]] = self.cases.get(body[0], 0) + body[1]
            for op, n in body[2].items():
                self.ops.setdefault(op, {}).setdefault(body[0], [0, 0])[0] += n
        elif kind == "skipped":
            self.skipped[body[0]] = body[1]
        elif kind == "divergence":
            d = divergence_from_dict(body[0])
            self.found += 1
            for op in d.ops:
                self.ops.setdefault(op, {}).setdefault(d.check, [0, 0])[1] += 1
            held = self.best.get(d.signature)
            if held is None or (d.statements, len(d.source)) < (held.statements,
                                                                 len(held.source)):
                self.best[d.signature] = d

    def line(self) -> str:
        elapsed = time.monotonic() - self.clock
        total = sum(self.cases.values())
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
        checks = {c: {"cases": n, "failed": distinct.get(c, 0)} for c, n in self.cases.items()}
        for c in self.skipped:
            checks.setdefault(c, {})["skipped"] = 1
        elapsed = time.monotonic() - self.clock
        notes = [f"A fuzz run: {jobs} processes, {sum(self.cases.values())} cases in "
                 f"{elapsed:.0f} s ({sum(self.cases.values()) / max(elapsed, 1e-9):.1f} per "
                 f"second); {self.found} divergences found, {len(self.best)} distinct "
                 f"signatures, shown as {len(shown)}: the smallest of each signature, and "
                 "of those only the ones whose ops no simpler one's explain ('also seen "
                 "as' lists the rest). 'failed' counts those shown."]
        notes += [f"{c} skipped: {why}" for c, why in sorted(self.skipped.items())]
        return Report(implementation=self.implementation, profile="fuzz",
                      started=self.started.isoformat(timespec="seconds"), seconds=elapsed,
                      checks=checks, ops=self.ops, divergences=shown,
                      notes=notes)


def fuzz(spec: str, *, minutes: float, jobs: int = 1, out: pathlib.Path,
         report: pathlib.Path | None = None, database: str | None = "default",
         checks: list[str] | None = None, batch: int = 50, rounds: int | None = None,
         timeout: float = 20.0, log=sys.stderr) -> Progress:
    """Fuzz `spec` for `minutes` in `jobs` processes; write the report (and its JSON beside
    it) at the end, and on KeyboardInterrupt. Returns what it saw."""
    out.mkdir(parents=True, exist_ok=True)
    checks = list(checks or CHECKS)
    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise ValueError(f"no such check: {sorted(unknown)[0]} (known: {', '.join(CHECKS)})")
    if database == "default":
        database = str(out / "database")
    open_database(database)  # a bad --database fails here, before any process starts
    deadline = time.time() + 60 * minutes
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    workers = [context.Process(target=_worker, daemon=True, args=(
        k, spec, str(out), database, deadline, batch, rounds, checks, messages, timeout))
        for k in range(jobs)]
    progress = Progress(checks)
    try:
        for w in workers:
            w.start()
        done, shown = 0, time.monotonic()
        while done < jobs:
            try:
                message = messages.get(timeout=1.0)
            except queues.Empty:
                if not any(w.is_alive() for w in workers):
                    break
                message = None
            if message is not None:
                done += message[1] == "done"
                progress.take(message)
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
        print(progress.line(), file=log, flush=True)
        if report is not None:
            write_report(progress.report(jobs), report)
            print(f"report written: {report}", file=log, flush=True)
    return progress


def report_from_folders(folders: list[pathlib.Path]) -> Report:
    """A report of the divergences saved under `folders` (each a fuzz run's OUT or its
    divergences/): for collecting the runs of several machines, or rereading a run killed
    before it wrote its report. Cases per check are not on disk, so they are not shown."""
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
