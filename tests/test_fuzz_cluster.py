"""Fuzzing on a Dask cluster (issue 23): a real scheduler and two real workers on loopback,
one of them killed mid-task; every divergence of a seeded fault still ends in one store and
one report, and each run leaves a line of history. docs/fuzzing.md, "Fuzzing on a cluster"."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from benchmarks.cluster_rate import free_port, local_cluster
from gradient_conformance.conformance.commands.fuzz import (
    Progress,
    _rechecked,
    fuzz,
    read_history,
    stored,
)

distributed = pytest.importorskip("distributed", reason="the [cluster] extra (make test "
                                  "installs it)")

ROOT = pathlib.Path(__file__).resolve().parent.parent
# An implementation every case of both checks finds (the last bit of each f32 flipped): the
# store must hold both, so what is tested is where divergences end up, not how often a subtle
# fault shows (a reversed fold went unseen by test_gradients_bit_for_bit in the ~50 cases the
# killed run gave it, CI 2026-12-05).
FAULT = str(ROOT / "tests" / "impls" / "last_bit_off.py")
CHECKS = ("test_gradients_bit_for_bit", "test_shares_are_summed_in_arrival_order")


def _fuzz(address: str, out: pathlib.Path, minutes: float, *sized: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gradient_conformance", "fuzz", f"--impl={FAULT}",
         "--minutes", str(minutes), "--task-seconds", "12", "--scheduler", address,
         "--out", str(out), *sized, *[f"--check={c}" for c in CHECKS]], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _kill_mid_task(address: str, worker: subprocess.Popen, name: str) -> None:
    """SIGKILL `worker` once it has been running a task for a few seconds."""
    with distributed.Client(address, timeout=60) as client:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
            if any(keys and names.get(a) == name for a, keys in client.processing().items()):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"worker {name} was never given a task")
    time.sleep(4.0)
    os.killpg(worker.pid, signal.SIGKILL)


# How a run is sized: in cases (the first tier: three tasks of two batches of each check,
# the minutes only a cap) or in minutes (the second: the cluster at its scale).
SIZES = [pytest.param(("--tasks", "3", "--rounds", "2", "--batch", "25"), id="in-cases"),
         pytest.param((), id="in-minutes", marks=pytest.mark.slow)]


@pytest.mark.parametrize("sized", SIZES)
def test_a_worker_killed_mid_run_loses_nothing_but_its_task(tmp_path, sized):
    out = tmp_path / "out"
    with local_cluster(tmp_path, 2) as (address, workers):
        driver = _fuzz(address, out, 1.5, *sized)  # time to spare on a loaded machine
        try:
            _kill_mid_task(address, workers[0], "w0")
            _, stderr = driver.communicate(timeout=400)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 1, stderr
    assert "Traceback" not in stderr and "lost" not in stderr, stderr
    assert "ran no case" not in stderr, stderr  # of the checks asked for, or of the others
    # One store: a folder per signature, every check of the fault among them.
    found = stored(out)
    assert {d.check for d in found} == set(CHECKS), stderr
    # One report, of the same divergences, with every check's cases counted.
    report = json.loads((out / "report.json").read_text())
    assert {d["check"] for d in report["divergences"]} == set(CHECKS)
    assert all(report["checks"][c]["cases"] > 0 for c in CHECKS)
    assert "tasks on the Dask cluster at " + address in report["notes"][0]
    assert f"report written: {out / 'report.html'}" in stderr
    [line] = read_history(out)
    assert set(line["signatures"]) == {p.name for p in (out / "divergences").iterdir()}


def _report(out: pathlib.Path) -> dict:
    return json.loads((out / "report.json").read_text())


def test_fixed_means_the_stored_case_now_agrees(tmp_path):
    """A run after a run of the same --impl says what is new, and which divergences it did
    not find again: fixed if the stored case, replayed, agrees now; still diverging if not.
    The history keeps a line per run; a line cut short by a kill is skipped."""
    impl, out, quiet = tmp_path / "my_impl.py", tmp_path / "out", open(os.devnull, "w")
    check = "test_gradients_bit_for_bit"
    impl.write_text(pathlib.Path(FAULT).read_text())  # found in every case
    first = fuzz(str(impl), minutes=3, rounds=1, batch=5, out=out, database="none", checks=[check],
                 report=out / "report.html", log=quiet)
    found = sorted(first.signatures().values())
    assert found and _report(out)["changes"] == {}
    # The fault still there, but not found again (the check ran, and passed its cases).
    (out / "history.jsonl").open("a").write('{"spec": "cut sh')
    again = Progress(out, str(impl))
    again.take((0, "record", {"check": check, "outcome": "passed", "cases": 3, "ops": {}}))
    changes = _rechecked(again.changes(read_history(out)), again, 20.0)
    assert changes["still"] == found and changes["fixed"] == changes["new"] == []
    # Fixed: the same --impl, now right.
    impl.write_text("from gradient_conformance.implementations.fast import *\n")
    second = fuzz(str(impl), minutes=3, rounds=1, batch=5, out=out, database="none",
                  checks=[check], report=out / "report.html", log=quiet)
    assert not second.best
    changes = _report(out)["changes"]
    assert changes["fixed"] == found and changes["new"] == changes["still"] == []
    html = (out / "report.html").read_text()
    assert "Since the previous run" in html and f'<code class="fixed">{found[0]}' in html
    assert [line["impl"] for line in read_history(out)] == [str(impl)] * 2
    # Another implementation's first run has nothing to compare with.
    assert Progress(out, "another").changes(read_history(out)) == {}
    # A line written before the field was called `impl` still counts as that --impl's.
    legacy = {"started": "2026-12-01T00:00:00", "spec": "another", "signatures": {}}
    assert Progress(out, "another").changes([legacy])["previous"] == legacy["started"]


def test_a_cluster_that_cannot_be_reached_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "gradient_conformance", "fuzz", f"--impl={FAULT}", "--minutes",
         "1", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("gradient-conformance fuzz: ")
