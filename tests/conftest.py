"""The project's own tests. `--slow` opts into the long profile (10^5 bit patterns per op, more
Hypothesis examples). Figures that tests measure are printed in the terminal summary."""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import HealthCheck, settings

# Every module of the project, loaded before any test: Hypothesis draws some values from the
# constants it finds in loaded local modules, so a derandomized test repeats exactly only if
# the same modules are loaded whichever tests run before it.
import conformance.checks
import conformance.implementation
import conformance.protocol  # noqa: F401
import generators  # noqa: F401
import implementations.fast
import implementations.faults  # noqa: F401
import reference
import reference.printer
import reference.realvalued
import reference.serve  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_EXAMPLES = ROOT.parent / "shared" / "spec" / "examples"
CASES = ROOT / "cases"

settings.register_profile("default", deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("slow", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow])

FIGURES: list[str] = []


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="run the slow, opt-in profile")


def pytest_configure(config):
    settings.load_profile("slow" if config.getoption("--slow") else "default")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow profile: run with --slow (make slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("figures measured by the tests")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def figures():
    """Append a line to the figures printed at the end of the run."""
    return FIGURES.append
