"""The hostile battery: implementations that raise, hang, crash, flood, lie or tamper, run
through the whole suite as a user runs it. docs/isolation.md, "Isolation"; SPEC.md, "Statuses".

The cases are data (tests/hostile/battery.toml, beside the implementations they name): each
must end with its exit status and no INTERNALERROR, fail the checks it names, and say what
it names. A hang would fail by the subprocess's timeout; the wall time of each is a figure.
The tests after the battery look at what a case leaves behind: its reports, its processes,
its replay commands.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib

import numpy as np
import pytest

from gradient_conformance.conformance.transports.confinement import bwrap_usable
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.conformance.transports.process import Child, ChildFailed
from tests.conftest import ROOT, suite

HERE = ROOT / "tests" / "hostile"
# The hostile implementations import their helpers beside them (_server.py): their folder is
# theirs, bound as a user binds a project's folder (docs/isolation.md, "What is bound").
BIND = f"--sandbox-bind={HERE}"
BATTERY = tomllib.loads((HERE / "battery.toml").read_text())


def impl_of(case: dict) -> str:
    if case.get("literal"):
        return case["impl"]
    if case["impl"].startswith("cmd:"):
        return f"cmd:{sys.executable} {HERE / case['impl'][4:]}"
    return str(HERE / case["impl"])


@pytest.mark.parametrize("name", sorted(BATTERY["case"]))
def test_the_suite_survives(name, figures):
    case = {**BATTERY["defaults"], **BATTERY["case"][name]}
    code, output, seconds = suite(impl_of(case), "-k", case["select"], *case["args"], BIND,
                                  shrink=bool(case.get("shrink")), timeout=case["seconds"])
    figures(f"hostile: {name:22} exit {code} in {seconds:5.1f} s")
    assert "INTERNALERROR" not in output, output[-3000:]
    assert code == case["status"], output[-3000:]
    failed = set(re.findall(r"^FAILED \S*::(\w+)", output, re.M))
    assert set(case.get("fails", [])) <= failed, output[-3000:]
    for text in case.get("says", []):
        assert text in output, f"{text!r} not said:\n{output[-3000:]}"
    if code == 2:  # a usage error: nothing ran, and nothing reads as passed
        assert "passed" not in output.splitlines()[-1]


MOST_CHECKS = 20


def test_each_case_selects_few_checks_and_some(pytester):
    """Each case's -k expression, as pytest's own -k reads it over the suite's collected
    checks (in this process): it selects at least one check and at most MOST_CHECKS, unless
    the case says it is about every check. So a selection cannot grow silently when a new
    check's name happens to match it (server_crashes went from 25 s to 87 s so)."""
    from _pytest.mark import KeywordMatcher
    from _pytest.mark.expression import Expression

    from gradient_conformance.conformance.commands.suite import suite_arguments
    items, _ = pytester.inline_genitems(*suite_arguments(["--impl=reference"]),
                                        "-p", "no:cacheprovider")
    assert len(items) > 100, [item.nodeid for item in items]
    matchers = [KeywordMatcher.from_item(item) for item in items]
    counts = {}
    for name, case in BATTERY["case"].items():
        if case.get("every_check"):
            assert case["select"] == "", name
            continue
        expression = Expression.compile(case["select"])
        counts[name] = sum(expression.evaluate(m) for m in matchers)
    assert all(1 <= count <= MOST_CHECKS for count in counts.values()), counts


@pytest.mark.parametrize("name", ["surrogate_message", "control_characters", "long_messages"])
def test_reports_are_written_whatever_the_implementation_says(name, tmp_path):
    html, data = tmp_path / "r.html", tmp_path / "r.json"
    code, output, _ = suite(str(HERE / f"{name}.py"), BIND, "-k", "op_form_recip or near_misses",
                            "--max-examples=3", "--no-shrink", "-q", f"--report={html}",
                            f"--report-json={data}")
    assert code == 1, output[-3000:]
    page = html.read_bytes().decode("utf-8")  # it is UTF-8, surrogates and all
    report = json.loads(data.read_text())
    assert report["divergences"]
    assert html.stat().st_size < 2_000_000 and data.stat().st_size < 2_000_000
    for raw in ("\x00", "\x1b", "\u202e", "\x07"):
        assert raw not in page and raw not in data.read_text()
    if name == "control_characters":
        assert "\\x1b[2J" in page and "\\u202e" in page


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_a_daemonizing_server_leaves_nothing_running(sandbox):
    """Without a sandbox it serves, and is killed at the end; in one, the sandbox ends with
    the process it started, and the server with it, and the run says it exited."""
    if sandbox == "bwrap" and not bwrap_usable():
        pytest.skip("bubblewrap is not installed here, or cannot make a sandbox")
    marker = f"hostile-daemon-{os.getpid()}-{time.time_ns()}"
    code, output, _ = suite(f"cmd:{sys.executable} {HERE / 'server_daemonizes.py'} {marker}", BIND,
                            "-k", "op_form_recip", "-q", f"--sandbox={sandbox}")
    if sandbox == "none":
        assert code == 0, output[-3000:]
    else:
        # Refused at start, or (when the daemon answered the first request before the
        # sandbox ended) a failure of the first case: either way it says why.
        assert code in (1, 2) and "it exited with status 0 before it" in output, output
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"still running: {left.stdout}"


def test_replay_paths_do_not_follow_the_implementation_s_chdir(tmp_path):
    code, output, _ = suite(str(HERE / "changes_directory.py"), BIND, "-k", "op_form_recip", "-q",
                            f"--cases-out={tmp_path / 'cases'}")
    assert code == 1, output[-3000:]
    replay = re.search(r"^replay:\s+(.+)$", output, re.M).group(1)
    again = subprocess.run(replay, shell=True, cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 1 and "DIVERGES" in again.stdout, again.stdout + again.stderr


def test_a_request_to_a_process_that_does_not_read_times_out():
    child = Child([sys.executable, "-c", "import time; time.sleep(60)"])
    started = time.monotonic()
    try:
        with pytest.raises(ChildFailed) as raised:
            child.send(b"x" * (16 << 20), time.monotonic() + 1.0)
        assert raised.value.reason == "timeout"
        assert time.monotonic() - started < 30
    finally:
        child.kill()


def test_a_flood_of_output_keeps_only_its_tail():
    child = Child([sys.executable, "-c", "import os, time\nfor _ in range(2000): "
                   "os.write(2, b'y' * 65536)\nos.write(1, b'done\\n'); time.sleep(60)"])
    try:
        assert child.receive_line(100, time.monotonic() + 60) == b"done"
        tail = child.output()
        assert child.output_bytes >= 2000 * 65536 and len(tail) < 20_000
        assert "earlier bytes not kept" in tail
    finally:
        child.kill()


def test_the_worker_is_killed_with_its_session_after_a_timeout():
    impl = load(str(HERE / "c_loop.py"), timeout=1.0)
    try:
        pid = impl.transport.child.process.pid
        source = "%a = buffer slot=0 dtype=f32\n%x = load %a\nstore %a %x\n"
        got = impl.run_case(source, {0: np.zeros((), np.float32)}, {0: ("f32", ())})
        assert got.status == "failure" and got.reason == "timeout"
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        again = impl.run_case(source, {0: np.zeros((), np.float32)}, {0: ("f32", ())})
        assert again.reason == "timeout" and impl.restarts == 1
    finally:
        impl.close()


def test_ctrl_c_still_stops_the_suite():
    """KeyboardInterrupt raised by an implementation is its failure; the user's own Ctrl-C
    (SIGINT to the suite) still ends the run."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gradient_conformance", f"--impl={HERE / 'c_loop.py'}", "-q",
         "-p", "no:cacheprovider", "-k", "exact_programs", "--case-timeout=60"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # Ctrl-C as a user's terminal delivers it, whatever this process inherited.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(8)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 2 and "KeyboardInterrupt" in output, output[-2000:]


def test_a_check_s_health_is_its_own_and_not_the_next_one_s():
    """A timeout abandons the check it happened in (its Guarded view refuses every later
    call, so shrinking stops), and nothing of it stays on the implementation the session
    shares: the next check's view calls it as ever."""
    from gradient_conformance.conformance.tallies import Tally
    from gradient_conformance.conformance.transports.loading import Abandoned, Guarded
    impl = load(str(HERE / "c_loop.py"), timeout=1.0)
    source = "%a = buffer slot=0 dtype=f32\n%x = load %a\nstore %a %x\n"
    buffers, declared = {0: np.zeros((), np.float32)}, {0: ("f32", ())}
    try:
        first = Tally()
        view = Guarded(impl, first)
        assert view.run_case(source, buffers, declared).reason == "timeout"
        assert first.timed_out and "timed out in this check" in first.abandon
        with pytest.raises(Abandoned):
            view.run_case(source, buffers, declared)
        second = Tally()
        assert Guarded(impl, second).run_case(source, buffers, declared).reason == "timeout"
        assert not any(hasattr(impl, name) for name in ("abandon", "timed_out",
                                                        "restarts_before"))
    finally:
        impl.close()


def test_what_an_implementation_says_never_reads_as_the_suite_s(tmp_path):
    """docs/isolation.md, "Isolation": a served name and version are cut to 200 characters
    and kept on one line; a message's lines are each marked as the implementation's. So no
    line of the output is the fake summary it wrote."""
    report = tmp_path / "r.json"
    code, output, _ = suite(f"cmd:{sys.executable} {HERE / 'server_says_lines.py'}", BIND, "-k",
                            "op_form_recip", "--no-shrink", f"--report-json={report}")
    assert code == 1, output[-3000:]
    fake = "========================= 200 passed in 1.00s ========================="
    assert fake not in output.splitlines() and f"| {fake}" in output.splitlines()
    said = json.loads(report.read_text())["implementation"]
    assert len(said["name"]) <= 200 and len(said["version"]) <= 200
    assert "\n" not in said["name"] + said["version"] and "\\n" in said["name"]
