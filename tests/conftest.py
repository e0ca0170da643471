"""The project's own tests, in two tiers (README, "The commands on a fresh clone"). The first,
`make test` (`pytest -m "not slow"`), proves every behaviour with the least work that shows
it. The second, marked `slow`, measures the suite's power (every seeded fault under the whole
ci profile, the catalogue located, 10^5 bit patterns per op, the cluster at scale): `make
test-all` runs it with `--slow`, which also loads the long Hypothesis profile. Without
`--slow` a test of the second tier is skipped, saying how to run it, so a plain `pytest`
stays quick. Figures that tests measure are printed in the terminal summary."""

from __future__ import annotations

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

settings.register_profile("default", deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("slow", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow])

FIGURES: list[str] = []


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="run the second tier (the tests marked slow) and the long profile")


def pytest_configure(config):
    settings.load_profile("slow" if config.getoption("--slow") else "default")


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


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("figures measured by the tests")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def figures(request):
    """Add a line to the figures printed at the end of the run."""
    return lambda line: request.node.user_properties.append(("figure", line))


def suite(impl: str, *args: str, cwd=ROOT, timeout: float = 900, env=None):
    """The conformance suite against `impl`, run as a user runs it (the gradient-conformance
    command, in a process of its own): (exit status, stdout and stderr, seconds)."""
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "gradient_conformance", f"--impl={impl}", "-p",
         "no:cacheprovider", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, env=env)
    return result.returncode, result.stdout + result.stderr, time.perf_counter() - started
