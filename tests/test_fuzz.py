"""The fuzzer of issue 5: it keeps what it finds on disk the moment it finds it (a SIGKILL
loses nothing written), writes its report at the end and on Ctrl-C, deduplicates by
signature, and shares its Hypothesis database between runs and machines.
docs/fuzzing.md, "Fuzzing"."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from gradient_conformance.conformance.commands.fuzz import Progress, fuzz
from gradient_conformance.conformance.commands.replay import replay
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.reports.records import (
    Divergence,
    case_file_name,
    divergence_from_dict,
    divergence_to_dict,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAULT = "gradient_conformance.implementations.faults.recip_form"
CHECK = "test_gradients_bit_for_bit"
LONG = str(ROOT / "tests" / "impls" / "off_when_long.py")  # diverges in long programs only


def _start(out: pathlib.Path, *extra) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gradient_conformance", "fuzz", f"--impl={LONG}", "--minutes", "10",
         "--out", str(out), "--check", CHECK, *extra], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    """Ctrl-C as a user's terminal delivers it: a process that inherits SIGINT ignored (as
    from some test runners' workers) would never see it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _records(out: pathlib.Path) -> list[pathlib.Path]:
    return sorted((out / "divergences").glob("*/*.json"))


def _wait_for_a_divergence(out: pathlib.Path, process, seconds: float = 300) -> None:
    end = time.monotonic() + seconds
    while not _records(out):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < end, "no divergence found in time"
        time.sleep(0.5)


def test_a_run_killed_with_sigkill_keeps_what_it_found(tmp_path):
    process = _start(tmp_path)
    try:
        _wait_for_a_divergence(tmp_path, process)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
    faulty = load(LONG)
    for path in _records(tmp_path):
        d = divergence_from_dict(json.loads(path.read_text()))
        assert d.check == CHECK and d.signature[2] == "bits"
        agrees, text = replay(faulty, d.case_file)
        assert not agrees, text
    assert not (tmp_path / "report.html").exists()  # killed: no chance to write it


def test_ctrl_c_writes_the_report(tmp_path):
    process = _start(tmp_path)
    _wait_for_a_divergence(tmp_path, process)
    time.sleep(1.0)  # let the parent take the worker's message
    os.kill(process.pid, signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert "interrupted: writing the report" in stderr, stderr
    assert f"report written: {tmp_path / 'report.html'}" in stderr
    html = (tmp_path / "report.html").read_text()
    assert f'<h3 class="check">{CHECK}</h3>' in html
    assert "This run was\ncut short" in html  # and so says the report
    assert " found, " in stderr and " shown" in stderr and " cases " in stderr and "/s" in stderr
    assert f"new signature: {CHECK} / " in stderr and "  replay:    " in stderr
    assert process.returncode == 2  # interrupted, as pytest's own status says it


def test_progress_keeps_the_smallest_of_each_signature(tmp_path):
    progress = Progress(tmp_path, FAULT, "2 processes")
    sig = (CHECK, "add+gradient+recip", "bits")

    def found(source: str, statements: int, signature=sig, ops=("add", "gradient", "recip")):
        d = Divergence(CHECK, "i", "s", source=source, statements=statements,
                       signature=signature, ops=list(ops), case_text=source + "\n",
                       case_name=f"{CHECK}-{statements}.ir")
        return {"check": CHECK, "outcome": "failed", "cases": 0,
                "divergence": divergence_to_dict(d)}

    big, small = found("a\nb\nc", 3), found("a\nb", 2)
    other = found("a", 1, (CHECK, "mul", "bits"), ("mul",))
    for worker, record in enumerate([big, small, other, big]):
        progress.take((worker % 2, "record", record))
    progress.take((0, "record", {"check": CHECK, "outcome": "passed", "cases": 10,
                                 "ops": {"add": 10}}))
    progress.take((1, "record", {"check": CHECK, "outcome": "passed", "cases": 5,
                                 "ops": {"add": 5}}))
    report = progress.report()
    assert [d.source for d in report.divergences] == ["a\nb", "a"]
    assert progress.found == 4 and report.checks[CHECK] == {"cases": 15, "failed": 2}
    # Cases per op, summed over the workers; divergences per op, of every one found.
    assert report.ops["add"] == {CHECK: [15, 3]} and report.ops["mul"] == {CHECK: [0, 1]}
    # The store keeps the smallest of each signature, as it arrived: both cases of `sig`
    # were written (the big one first), and the smallest's record is the last written.
    # Each named by its content, whatever name the record gave (docs/isolation.md, "Isolation").
    assert sorted(p.name for p in (tmp_path / "divergences").glob("*/*.ir")) == sorted(
        case_file_name(CHECK, text + "\n", ".ir") for text in ("a", "a\nb", "a\nb\nc"))


def test_each_new_signature_is_said_once_with_its_answer_and_counts_read_the_same(tmp_path):
    """docs/fuzzing.md, "Fuzzing": the driver says each signature the first time it arrives (what
    differs, the diagnosis, the location, the replay command), and names its three counts
    the same on the progress line and in the report."""
    progress = Progress(tmp_path, FAULT, "1 process")

    def record(statements: int, subject: str) -> dict:
        d = Divergence(CHECK, "i", f"slot 1[0]: differs {statements}\nmore", source="a",
                       statements=statements, signature=(CHECK, subject, "bits"),
                       ops=[subject], case_text=f"a{statements}\n",
                       diagnosis_line="diagnosis: the spec, but one that ...",
                       location_line="location: line 3, ...")
        return {"check": CHECK, "outcome": "failed", "cases": 1,
                "divergence": divergence_to_dict(d)}

    progress.take((0, "record", record(3, "add")))
    said = progress.said()
    assert said[0] == f"new signature: {CHECK} / add / bits"
    assert said[1:4] == ["  slot 1[0]: differs 3", "  diagnosis: the spec, but one that ...",
                         "  location: line 3, ..."]
    assert said[4].startswith("  replay:    ") and "--impl=" in said[4]
    progress.take((0, "record", record(2, "add")))  # the same signature, smaller
    assert progress.said() == []
    progress.take((0, "record", record(1, "mul")))
    assert progress.said()[0] == f"new signature: {CHECK} / mul / bits"
    counts = "3 divergences found, 2 signatures, 2 shown"
    assert counts in progress.line() and counts in progress.report().notes[0]


def test_a_check_that_ran_no_case_is_a_warning_in_the_terminal_and_the_report(tmp_path):
    """A check the sessions collected that ran nothing (and was not skipped) is said to have
    run no case; one that ran cases, or was skipped with its reason, is not."""
    progress = Progress(tmp_path, FAULT, "1 process")
    progress.take((0, "checks", [CHECK, "test_idle", "test_skipped"]))
    progress.take((0, "record", {"check": CHECK, "outcome": "passed", "cases": 3, "ops": {}}))
    progress.take((0, "record", {"check": "test_skipped", "outcome": "skipped",
                                 "skip": "unsupported", "cases": 0}))
    assert [w.split(" ran no case")[0] for w in progress.idle()] == ["warning: test_idle"]
    assert any(n.startswith("warning: test_idle ran no case in ") for n in
               progress.report().notes)


def test_a_run_goes_on_from_the_store_it_finds(tmp_path):
    """A run into an OUT that an earlier run (killed, say) stored into: a signature stored
    there is this run's too when found again, and is rewritten only by a smaller case."""
    sig = (CHECK, "add+gradient+recip", "bits")

    def record(statements: int) -> dict:
        source = "\n".join("a" * statements)
        d = Divergence(CHECK, "i", "s", source=source, statements=statements, signature=sig,
                       ops=["add"], case_text=source + "\n", case_name=f"{CHECK}-{statements}.ir")
        return {"check": CHECK, "outcome": "failed", "cases": 0,
                "divergence": divergence_to_dict(d)}

    Progress(tmp_path, FAULT).take((0, "record", record(2)))
    again = Progress(tmp_path, FAULT)
    again.take((0, "record", record(5)))
    assert [d.statements for d in again.best.values()] == [2]
    assert len(list((tmp_path / "divergences").glob("*/*.ir"))) == 1
    again.take((0, "record", record(1)))
    assert [d.statements for d in again.best.values()] == [1]
    assert len(list((tmp_path / "divergences").glob("*/*.ir"))) == 2


def _finds_from_the_database(tmp_path, database: str) -> None:
    """A first run finds the fault; a second, allowed one generated example, finds it again
    at once, from the database's replay (the second run may shrink the replayed case
    further, so its program need not be the first run's), where the same run against an
    empty database finds nothing: Hypothesis's one example is then its simplest, a program
    too short for the fault (tests/impls/off_when_long.py)."""
    first = fuzz(LONG, minutes=3, rounds=6, jobs=1, out=tmp_path / "one", database=database,
                 checks=[CHECK], log=open(os.devnull, "w"))
    assert first.best, "a first run of 300 cases found nothing to store"
    again = dict(minutes=3, rounds=1, batch=1, jobs=1, checks=[CHECK], log=open(os.devnull, "w"))
    second = fuzz(LONG, out=tmp_path / "two", database=database, **again)
    assert second.best
    assert {d.check for d in second.best.values()} == {CHECK}
    fresh = fuzz(LONG, out=tmp_path / "fresh", database=str(tmp_path / "empty"), **again)
    assert sum(fresh.totals.cases.values()) and not fresh.best, \
        "one case without the database found the fault"


def test_the_database_persists_between_runs(tmp_path):
    _finds_from_the_database(tmp_path, str(tmp_path / "shared-database"))
    assert any((tmp_path / "shared-database").rglob("*"))


def _redis_package() -> bool:
    try:
        import redis  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(shutil.which("redis-server") is None or not _redis_package(),
                    reason="needs redis-server (Debian's redis-server, which make test "
                    "installs where it can) and the redis package (the [redis] extra)")
def test_a_redis_database_is_shared(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                               "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis
        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        _finds_from_the_database(tmp_path, f"redis://127.0.0.1:{port}/0")
        assert client.dbsize() > 0
    finally:
        server.kill()
        server.wait()


def test_bad_fuzz_arguments_are_usage_errors(tmp_path, capsys, monkeypatch):
    """The arguments the command checks before it starts anything, in this process (pytest is
    never reached); a check that names no check, as a user runs it."""
    from gradient_conformance.conformance.commands import main

    def reached(*args, **kw):
        raise AssertionError(f"pytest ran for bad arguments: {args}")
    monkeypatch.setattr("pytest.main", reached)
    for argv in (["--minutes", "0"], ["--minutes", "1", "--jobs", "0"],
                 ["--minutes", "1", "--tasks", "2"],
                 ["--minutes", "1", "--tasks", "0", "--scheduler", "tcp://127.0.0.1:9"]):
        code = main(["fuzz", f"--impl={FAULT}", "--out", str(tmp_path), *argv])
        said = capsys.readouterr().err
        assert code == 2 and said.startswith("gradient-conformance fuzz: "), (argv, said)
    assert not any(tmp_path.iterdir())  # nothing was started, so nothing written
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "fuzz",
                          f"--impl={FAULT}", "--out", str(tmp_path), "--minutes", "1",
                          "--check", "nope"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
