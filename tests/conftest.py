"""The project's own tests, in two tiers (README, "The commands on a fresh clone"). The first,
`make test` (`pytest -m "not slow"`), proves every behaviour with the least work that shows
it. The second, marked `slow`, measures the suite's power (every seeded fault under the whole
ci profile, the catalogue located, 10^5 bit patterns per op, the cluster at scale): `make
test-all` runs it with `--slow`, which also loads the long Hypothesis profile. Without
`--slow` a test of the second tier is skipped, saying how to run it, so a plain `pytest`
stays quick. Figures that tests measure are printed in the terminal summary."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, settings

# Every module of the project, loaded before any test: Hypothesis draws some values from the
# constants it finds in loaded local modules, so a derandomized test repeats exactly only if
# the same modules are loaded whichever tests run before it.

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_EXAMPLES = ROOT.parent / "shared" / "spec" / "examples"
CASES = ROOT / "cases"
FAST = "gradient_conformance.implementations.fast"
FAULTS = "gradient_conformance.implementations.faults"

# The project's own property tests: 50 examples in the first tier (each property is proved
# with the least work that shows it), 1,000 in the second (--slow), which measures.
settings.register_profile("default", deadline=None, max_examples=50,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("slow", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow])

# pytester: tests that run pytest in this process (the battery's selections, collected).
pytest_plugins = ["pytester"]

FIGURES: list[str] = []
# Each test's whole protocol (setup, call, teardown), in seconds, by node id: summed from the
# reports, so that under xdist the controller sees every worker's tests.
SECONDS: dict[str, float] = {}
SLOWEST = 10
COSTLIEST = 5
# Where benchmarks/tiers.py wants every test's seconds: taken from the environment by this
# session alone, so that no run a test starts (the battery as nobody, a user's own pytest)
# writes its own seconds there, or fails for not being allowed to.
RECORD = pytest.StashKey[str]()


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="run the second tier (the tests marked slow) and the long profile")


def pytest_configure(config):
    settings.load_profile("slow" if config.getoption("--slow") else "default")
    config.stash[RECORD] = os.environ.pop("GRADIENT_CONFORMANCE_TEST_SECONDS", "")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="the second tier: run with --slow -m slow (make test-all)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    # The figures a test measured ride on its report, so that they reach the process that
    # prints the summary also from an xdist worker.
    if report.when == "call":
        FIGURES.extend(value for name, value in report.user_properties if name == "figure")
    SECONDS[report.nodeid] = SECONDS.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """The figures the tests measured, and the time the tier's tests took: a report to read
    (README, "The tiers": the first tier's targets), never a timed assertion."""
    if SECONDS:
        terminalreporter.section(f"the {SLOWEST} slowest tests, each its whole protocol")
        for nodeid, seconds in sorted(SECONDS.items(), key=lambda kv: -kv[1])[:SLOWEST]:
            terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")
        terminalreporter.write_line(f"{sum(SECONDS.values()):7.1f} s  in all, {len(SECONDS)} "
                                    "tests (summed over the workers: CPU-bound, not wall time)")
        # A function's parametrizations summed: 74 catalogue variants at 60 s each cost more
        # than any one test, and show only here.
        functions: dict[str, list[float]] = {}
        for nodeid, seconds in SECONDS.items():
            functions.setdefault(nodeid.split("[")[0], []).append(seconds)
        terminalreporter.section(f"the {COSTLIEST} costliest test functions, their "
                                 "parametrizations summed")
        for name, each in sorted(functions.items(), key=lambda kv: -sum(kv[1]))[:COSTLIEST]:
            terminalreporter.write_line(f"{sum(each):7.1f} s  {name} ({len(each)} tests)")
        # Every test's, for benchmarks/tiers.py to keep beside the tier's log (where to
        # trim a tier is a question of all of them, not of the ten slowest).
        every = terminalreporter.config.stash.get(RECORD, "")
        if every:
            import json
            pathlib.Path(every).write_text(json.dumps(
                dict(sorted(SECONDS.items(), key=lambda kv: -kv[1])), indent=0))
    if FIGURES:
        terminalreporter.section("figures measured by the tests")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def figures(request):
    """Add a line to the figures printed at the end of the run."""
    return lambda line: request.node.user_properties.append(("figure", line))


def suite(impl: str, *args: str, cwd=ROOT, timeout: float = 900, env=None,
          examples: int | None = 5, shrink: bool = False):
    """The conformance suite against `impl`, run as a user runs it (the gradient-conformance
    command, in a process of its own): (exit status, stdout and stderr, seconds).

    Most tests assert plumbing (an exit status, a message, a report), which shows on the first
    cases: so by default each generated check runs `examples` cases, without shrinking. A
    test of what the profile finds, or of shrinking, asks for it: `examples=None` (the
    profile's, or the --max-examples it passes), `shrink=True`."""
    chosen = any(a.startswith(("--max-examples", "--conformance-max-examples")) for a in args)
    extra = [f"--max-examples={examples}"] if examples is not None and not chosen else []
    if not shrink and "--no-shrink" not in args:
        extra.append("--no-shrink")
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "gradient_conformance", f"--impl={impl}", "-p",
         "no:cacheprovider", *extra, *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, env=env)
    return result.returncode, result.stdout + result.stderr, time.perf_counter() - started


def listening(path, heard: list, stop) -> object:
    """A Unix socket server outside the sandbox at `path`, appending to `heard` the first
    bytes of each connection until `stop` (a threading.Event) is set: what a hostile
    implementation would reach. The socket, to close."""
    import socket
    import threading
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    server.settimeout(0.2)

    def serve():
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            with connection:
                heard.append(connection.recv(64))
    threading.Thread(target=serve, daemon=True).start()
    return server
