"""Running the installed suite under pytest: the `gradient-conformance --impl=X ...` command,
and what the other commands share (loading an implementation as --impl names it)."""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradient_conformance.reports.records import Report

# The suite's options as this command spells them -> the plugin's (conformance/plugin.py),
# whose names carry a prefix so that they cannot clash with another pytest plugin's.
SUITE_OPTIONS = {
    "--profile": "--conformance-profile", "--max-examples": "--conformance-max-examples",
    "--case-timeout": "--conformance-case-timeout", "--report": "--conformance-report",
    "--load-timeout": "--conformance-load-timeout",
    "--report-json": "--conformance-report-json", "--cases-out": "--conformance-cases-out",
    "--xfails-file": "--conformance-xfails-file", "--skips-file": "--conformance-skips-file",
    "--no-shrink": "--conformance-no-shrink", "--in-process": "--conformance-in-process",
    "--memory-limit": "--conformance-memory-limit", "--sandbox": "--conformance-sandbox",
    "--pass-env": "--conformance-pass-env",
}
CHECKS_PACKAGE = "gradient_conformance.conformance.checks"


def suite_arguments(argv: list[str]) -> list[str]:
    """The pytest arguments that run the installed suite with these options."""
    out = ["--pyargs", CHECKS_PACKAGE, "-o", "python_files=test_*.py", "-o",
           "python_functions=test_*"]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        out += ["-p", "gradient_conformance.conformance.plugin"]
    for arg in argv:
        name, equals, value = arg.partition("=")
        out.append(SUITE_OPTIONS[name] + equals + value if name in SUITE_OPTIONS else arg)
    return out


def run_suite(argv: list[str]) -> int:
    import json

    import pytest
    # The report shows the command as the user typed it, not as pytest was called.
    os.environ["GRADIENT_CONFORMANCE_COMMAND"] = json.dumps(["gradient-conformance", *argv])
    return int(pytest.main(suite_arguments(argv)))


@dataclass
class Finished:
    """A run of the suite in a process of its own: its exit status, what it printed, how long
    it took, and (when it wrote one) its JSON report, read and checked (reports/records.py)."""

    code: int
    output: str
    seconds: float
    report: Report | None = None


def in_subprocess(argv: list[str], *, report_json: pathlib.Path | None = None, env=None,
                  timeout: float | None = None) -> Finished:
    """`gradient-conformance ARGV` in a process of its own, from the current directory (so
    that a user's modules and relative paths mean what they say). The one place the commands
    (matrix, mutants) and the benchmarks run the suite and read its report: with
    `report_json`, the run writes it there, and a report left from an earlier run is never
    taken for this one's."""
    import subprocess
    import sys
    import time

    from gradient_conformance.reports.records import from_json
    extra = []
    if report_json is not None:
        report_json.unlink(missing_ok=True)
        extra = [f"--report-json={report_json}"]
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", *argv, *extra],
                         capture_output=True, text=True, env=env, timeout=timeout)
    done = Finished(run.returncode, run.stdout + run.stderr, time.perf_counter() - started)
    if report_json is not None and report_json.exists():
        try:
            done.report = from_json(report_json.read_text())
        except (ValueError, KeyError, TypeError):
            done.report = None
    return done


def load_implementation(spec: str, timeout: float):
    """The implementation --impl names, or ValueError (a usage error) saying why not."""
    from gradient_conformance.conformance.transports.loading import LoadFailed, load
    try:
        return load(spec, timeout=timeout)
    except LoadFailed as problem:
        raise ValueError(f"--impl={spec}: could not load it: {problem}") from None

