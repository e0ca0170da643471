"""The pytest plugin: `gradient-conformance --impl=X`, or `pytest --pyargs
gradient_conformance.conformance.checks --impl=X`. SPEC.md, "The conformance suite".

Installed, pytest loads this module in every run of the venv, so it stays inert until asked
for: importing it costs nothing but pytest, its options carry the `--conformance-` prefix
(only `--impl` has a short name), and nothing heavy (numpy, Hypothesis, Jinja2, the oracle)
is imported until `--impl` is given. Collecting the suite without `--impl` is a usage error.

Each check runs where pytest runs it: in this process, or in an xdist worker. Whatever a check
saw (its outcome, its divergence, the cases it ran per op, the figures) rides on its test
report (`user_properties`), so that the process that writes the reports, this one or the
xdist controller, sees every worker's.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import pathlib
import re
import shlex
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from gradient_conformance.conformance.totals import Totals

PROFILES = {
    # Derandomized, so a CI run is repeatable; sized so the whole suite stays near a minute.
    "ci": dict(max_examples=200, derandomize=True, deadline=None, database=None),
    "dev": dict(max_examples=100, deadline=None),
    "nightly": dict(max_examples=2000, deadline=None),
}
PROPERTY = "gradient_conformance"  # the user_properties entry a check's record rides in
DEFAULT_OUTPUT = ".gradient-conformance"
USAGE = ("name the implementation to test: --impl=MODULE (a module importable from here), "
         "--impl=path/to/impl.py, --impl=reference, or --impl=cmd:'PROGRAM ARGS' "
         "(gradient-conformance spec \"The protocol\")")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} examples would check nothing; give 1 or "
                                         "more")
    return value


def _size(text: str) -> int:
    from gradient_conformance.conformance.transports.confinement import parse_size
    try:
        return parse_size(text)
    except ValueError as problem:
        raise argparse.ArgumentTypeError(str(problem)) from None


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("the timeout must be more than 0 seconds")
    return value


class Hooks:
    """The hooks this plugin declares, for plugins that extend a run of the suite (fuzz's
    FuzzLoop is one): pytest calls them in the process that writes the reports."""

    @staticmethod
    @pytest.hookspec
    def pytest_gradient_conformance_loaded(implementation: dict) -> None:
        """The implementation under test was loaded: its name, version, spec and
        capabilities."""

    @staticmethod
    @pytest.hookspec
    def pytest_gradient_conformance_record(record: dict) -> None:
        """A check ended: its record (outcome, what it measured, its divergence as JSON)."""

    @staticmethod
    @pytest.hookspec(firstresult=True)
    def pytest_gradient_conformance_keep_cases() -> bool | None:
        """Whether the run saves each divergence as a case file (default: yes); a plugin
        that keeps a store of its own answers False."""


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(Hooks)


def pytest_addoption(parser):
    group = parser.getgroup("gradient_conformance",
                            "gradient conformance suite (gradient-conformance --help)")
    group.addoption("--impl", action="append", default=None, metavar="IMPL",
                    help="the implementation under test: a module name, a .py file, "
                    "reference, or cmd:'PROGRAM ARGS'")
    group.addoption("--conformance-profile", default="ci", choices=sorted(PROFILES),
                    help="ci (derandomized, the same cases every run), dev, or nightly "
                    "(many examples)")
    group.addoption("--conformance-max-examples", type=_positive_int, default=None,
                    metavar="N", help="Hypothesis examples per check, instead of the "
                    "profile's")
    group.addoption("--conformance-no-shrink", action="store_true",
                    help="report failing cases as found, without shrinking them")
    group.addoption("--conformance-case-timeout", type=_positive_seconds, default=20.0,
                    metavar="SECONDS", help="how long the implementation may take to build "
                    "and run one case (default 20)")
    group.addoption("--conformance-load-timeout", type=_positive_seconds, default=120.0,
                    metavar="SECONDS", help="how long the implementation may take to start "
                    "(import its module, or answer a cmd: program's first request; default "
                    "120)")
    group.addoption("--conformance-in-process", action="store_true",
                    help="call a Python implementation in the suite's own process, for a "
                    "debugger: UNPROTECTED, a crash or a hang of the implementation is the "
                    "suite's")
    group.addoption("--conformance-memory-limit", type=_size, default=None, metavar="SIZE",
                    help="the most memory the implementation's process may take (8G, 512M; "
                    "default: half the machine's, shared among xdist's processes)")
    group.addoption("--conformance-sandbox", default="auto", choices=["auto", "bwrap", "none"],
                    help="run the implementation in a bubblewrap sandbox: auto (where "
                    "bubblewrap works; the default), bwrap (or a usage error), none")
    group.addoption("--conformance-pass-env", action="append", default=[], metavar="NAME",
                    help="an environment variable the implementation's process is given "
                    "(it gets only a short allow-list otherwise); again for more")
    group.addoption("--conformance-xfails-file", default=None, metavar="FILE",
                    help="checks or case files expected to fail: one a line, each matched as "
                    "a part of the stable id (test_forward.py::test_name[param])")
    group.addoption("--conformance-known", default=None, metavar="FILE",
                    help="known divergences, one a line: a signature (CHECK / SUBJECT / "
                    "KIND) or a variant's name (reversed-arrival); a divergence one names is "
                    "expected, a new one fails, an entry nothing matched is said to be fixed")
    group.addoption("--conformance-write-known", default=None, metavar="FILE",
                    help="write the divergences this run found as a known file (a variant "
                    "where the diagnosis names one, else the signature), with the entries of "
                    "--known it found again")
    group.addoption("--conformance-skips-file", default=None, metavar="FILE",
                    help="checks or case files to skip, matched as for the xfails file")
    group.addoption("--conformance-report", default=None, metavar="PATH.html",
                    help="write the HTML report of the run here")
    group.addoption("--conformance-report-json", default=None, metavar="PATH.json",
                    help="write the run as JSON here")
    group.addoption("--conformance-cases-out", default=None, metavar="DIR",
                    help="save each divergence as a case file here (default: REPORT.cases/ "
                    f"beside the report, or {DEFAULT_OUTPUT}/divergences/)")


# --- configuration ---------------------------------------------------------------------------


class Run:
    """The suite's state in this process: the implementation, and (where the reports are
    written) what every check saw."""

    def __init__(self, config, spec: str):
        self.config, self.spec = config, spec
        self.base = pathlib.Path(config.invocation_params.dir).resolve()
        self.profile = config.getoption("--conformance-profile")
        # A derandomized profile draws the same cases every run; the others steer towards
        # the conditions they rarely take (running.Tally.reach).
        self.guided = not PROFILES[self.profile].get("derandomize", False)
        self.cases_dir = self._cases_dir()
        self.started, self.clock = time.time(), time.monotonic()
        self.totals: Totals | None = None  # made at the first record (Totals imports the oracle)
        self.hung = 0  # checks in a row in which the implementation timed out
        self.written: list[pathlib.Path] = []
        self.impl = None
        self.settings = None  # the checks' Hypothesis settings (check_settings)
        self.explainer = None  # the explanation stage (explain.py), made at its first use
        # A failing generated check's further looks (pytest_pyfunc_call); fuzz, which keeps
        # looking batch after batch, wants none.
        self.more_looks = MORE_LOOKS
        self.interrupted = ""  # what happened, when the run was cut short
        self.ended_sent = (0, 0)  # this process's Ended, as far as its records have told
        self.reported: set[str] = set()  # the node ids a record came for
        self.known = None  # the entries of --known (conformance/known.py), when given
        self.known_written: pathlib.Path | None = None  # where --write-known wrote
        self.reduced: set[tuple] = set()  # (test id, subject, kind) of the findings reduced

    def _cases_dir(self) -> pathlib.Path:
        option = self.config.getoption
        given = option("--conformance-cases-out")
        report = option("--conformance-report") or option("--conformance-report-json")
        if given:
            return self.base / given
        if report:
            return (self.base / report).with_suffix(".cases")
        # Like pytest's own cache folder: what a run writes stays out of the user's git.
        root = self.base / DEFAULT_OUTPUT
        root.mkdir(exist_ok=True)
        ignore = root / ".gitignore"
        try:
            if ignore.is_symlink() or not ignore.is_file() or ignore.read_text() != "*\n":
                from gradient_conformance.conformance.divergence import write_atomically
                ignore.unlink(missing_ok=True)  # a link is replaced, never written through
                write_atomically(ignore, "*\n")
        except OSError:
            pass  # a courtesy to the user's git, not needed for the run
        return root / "divergences"

    def take(self, record: dict) -> None:
        """One check's record, from this process or an xdist worker."""
        if self.totals is None:
            from gradient_conformance.conformance.totals import Totals
            self.totals = Totals()
        self.totals.take(record)

    # Hooks of this run, registered as a plugin of its own when --impl is given.

    def pytest_sessionstart(self, session):
        if _worker_id(self.config) is not None:
            return
        self.config.hook.pytest_gradient_conformance_loaded(
            implementation=self.impl.described())
        if self.config.getoption("dist", "no") != "no":
            self.impl.close()  # the xdist controller runs no check: it only needed to ask

    def pytest_runtest_logreport(self, report):
        """Where the reports are written (not in an xdist worker), take each check's
        record, from this process or from a worker."""
        if _worker_id(self.config) is not None:
            return
        for name, value in report.user_properties:
            if name == PROPERTY:
                self.reported.add(report.nodeid)
                record = json.loads(value)
                self.take(record)
                self.config.hook.pytest_gradient_conformance_record(record=record)
                self._say_found(report.nodeid, record)

    def _say_found(self, nodeid: str, record: dict) -> None:
        """A divergence on the terminal as soon as its check ends, not only when the run does:
        what differs, its diagnosis, its location and how to replay it (the full text comes
        at the end, as pytest's failures do)."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        found = [record.get("divergence"), *record.get("more", [])]
        if terminal is None or not isinstance(found[0], dict):
            return
        # After -q's progress characters too, which ensure_newline does not end (it ends a
        # line of a test file's name only): the heading starts a line of its own.
        writer = getattr(terminal, "_tw", None)
        if writer is not None and getattr(writer, "width_of_current_line", False):
            writer.line()
        terminal.ensure_newline()
        for k, d in enumerate(f for f in found if isinstance(f, dict)):
            terminal.write_line(f"divergence found by {nodeid.split('::', 1)[-1]}"
                                + (f" ({k + 1} of {len(found)})" if len(found) > 1 else "")
                                + ":", red=True)
            summary = str(d.get("summary", "")).splitlines()
            body = [summary[0] if summary else "", str(d.get("diagnosis_line", "")),
                    str(d.get("location_line", "")),
                    f"replay:    {d['replay']}" if d.get("replay") else ""]
            for line in filter(None, body):
                terminal.write_line(f"  {line}")

    def pytest_sessionfinish(self, session, exitstatus):
        if _worker_id(self.config) is not None:
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            # Cut short, even in its first check: a report that says so, and what did not run.
            left: dict[str, list[int]] = {}  # check -> [instances not run, instances]
            for item in (i for i in session.items if is_check(i)):
                counts = left.setdefault(check_name(item), [0, 0])
                counts[0] += item.nodeid not in self.reported
                counts[1] += 1
            unrun = [f"{name}" + (f" ({n} of {total})" if total > 1 else "")
                     for name, (n, total) in sorted(left.items()) if n]
            self.interrupted = (
                "interrupted (Ctrl-C, or a signal) after "
                f"{time.monotonic() - self.clock:.0f} s; "
                + (f"these checks did not run, or not all their instances: {', '.join(unrun)}"
                   if unrun else "every check had run" if session.items else
                   "the checks that did not run are not known here (xdist)"
                   if self.config.getoption("dist", "no") != "no" else
                   "before the checks were collected"))
            if self.totals is None:
                from gradient_conformance.conformance.totals import Totals
                self.totals = Totals()
        if self.totals is None:
            return
        from gradient_conformance.conformance.divergence import write_atomically
        from gradient_conformance.conformance.explain import prefer
        from gradient_conformance.reports.html import render
        from gradient_conformance.reports.records import to_json
        prefer(self.totals.divergences)
        report = self.report()
        report.notes += self.known_lines()
        if self.config.getoption("--conformance-write-known"):
            from gradient_conformance.conformance.known import known_text
            path = self.base / self.config.getoption("--conformance-write-known")
            kept = [e.text for e in self.known.entries if e.text in self.totals.known] \
                if self.known is not None else []
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, known_text(self.totals.divergences, kept))
            self.known_written = path
        for option, text in (("--conformance-report", render),
                             ("--conformance-report-json", to_json)):
            if self.config.getoption(option):
                path = self.base / self.config.getoption(option)
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(path, text(report))
                self.written.append(path)

    def pytest_terminal_summary(self, terminalreporter):
        if _worker_id(self.config) is not None or self.totals is None:
            return
        from gradient_conformance.reports.records import counted
        from gradient_conformance.reports.terminal import figures_lines
        lines = figures_lines(self.totals.figures)
        explained = [d.diagnosis.get("seconds", 0.0) + d.location.get("seconds", 0.0)
                     for d in self.totals.divergences if "tried" in d.diagnosis]
        if explained:
            run = time.monotonic() - self.clock
            probes = sum(d.location.get("runs", 0) for d in self.totals.divergences)
            lines.append(f"explanation: {counted(len(explained), 'divergence')} re-run "
                         "under the catalogue's variants and probed "
                         f"({counted(probes, 'run')} of the implementation) in "
                         f"{sum(explained):.1f} s, "
                         f"{100 * sum(explained) / run:.1f}% of the run's {run:.0f} s")
        if any(self.totals.ended):
            lines.append(f"contained: {self.confinement_words()}")
        if self.impl.restarts:
            lines.append(f"the implementation was started again {self.impl.restarts} times, "
                         "after crashes, timeouts, replies that broke the protocol, or memory "
                         "past its limit")
        if lines:
            terminalreporter.section("conformance figures")
            for line in lines:
                terminalreporter.write_line(line)
        for line in self.known_lines():
            terminalreporter.write_line(line, yellow=True)
        if self.totals.divergences:
            from gradient_conformance.conformance.explain import verdict_lines
            terminalreporter.section("conformance verdict")
            for line in verdict_lines(self.totals.divergences):
                terminalreporter.write_line(line)
        if self.interrupted:
            terminalreporter.write_line(f"this run was cut short: {self.interrupted}; it is no "
                                        "verdict", red=True, bold=True)
        for path in self.written:
            terminalreporter.write_line(f"report written: {_shown(path, self.base)}")
        if self.known_written is not None:
            terminalreporter.write_line(f"known divergences written: "
                                        f"{_shown(self.known_written, self.base)} (--known "
                                        "reads it)")
        saved = [d for d in self.totals.divergences if d.case_file]
        if saved:
            terminalreporter.write_line(
                f"{counted(len(saved), 'divergence')} saved as case files in "
                f"{_shown(self.cases_dir, self.base)}/; each failure above gives the command "
                "that replays it")

    def report(self):
        from importlib import metadata

        import hypothesis
        import numpy

        from gradient_conformance.conformance.totals import coverage
        from gradient_conformance.reports.records import Report
        impl, totals = self.impl, self.totals
        versions = {"python": sys.version.split()[0], "numpy": numpy.__version__,
                    "hypothesis": hypothesis.__version__}
        try:
            versions["gradient-conformance"] = metadata.version("gradient-conformance")
        except metadata.PackageNotFoundError:
            pass
        return Report(
            implementation=impl.described(),
            profile=self.profile,
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started)),
            seconds=time.monotonic() - self.clock, checks=totals.outcomes, cases=totals.cases,
            skips={c: sorted(r) for c, r in totals.skips.items()}, ops=totals.ops,
            conditions=totals.conditions,
            coverage=coverage(totals.conditions, totals.generated),
            ulps=totals.ulps, divergences=totals.divergences, versions=versions,
            command=shlex.join(_command_line(self.config)),
            isolation=_isolation(self.config, self.spec), interrupted=self.interrupted,
            confinement=self.confinement_words())

    def known_lines(self) -> list[str]:
        """What became of the --known entries: those found again (expected), and those
        nothing matched (fixed, as far as this run looked; or not looked for, when the one
        check a signature names did not run)."""
        if self.known is None or self.totals is None:
            return []
        from gradient_conformance.reports.records import counted
        found = self.totals.known
        lines = [f"known divergence found again, expected: {entry} "
                 f"({counted(found[entry], 'check')})"
                 for entry in (e.text for e in self.known.entries) if entry in found]
        ran = {check for check, outcomes in self.totals.outcomes.items()
               if set(outcomes) - {"skipped"}}
        for entry in self.known.unmatched(set(found)):
            if entry.check is not None and entry.check not in ran:
                lines.append(f"known entry not looked for: {entry.text} ({entry.check} did "
                             "not run)")
            else:
                lines.append(f"known entry matched nothing in this run (fixed, as far as "
                             f"this run looked): {entry.text}")
        return lines

    def confinement_words(self) -> str:
        """What held the implementation, and what had to be ended of it (every process's)."""
        if self.impl is None or self.impl.confinement is None:
            return ""
        ended = self.totals.ended if self.totals is not None else [0, 0]
        said = [self.impl.confinement.words()]
        if ended[0]:
            said.append(f"{ended[0]} process{'es' if ended[0] > 1 else ''} it left running "
                        "killed")
        if ended[1]:
            said.append(f"its process started again {ended[1]} time"
                        f"{'s' if ended[1] > 1 else ''} after running out of memory or "
                        "growing past the limit")
        return "; ".join(said)


def _command_line(config) -> list[str]:
    """The command of this run as the user typed it: gradient-conformance's own arguments
    when it started pytest (it says so in the environment), else pytest's."""
    given = os.environ.get("GRADIENT_CONFORMANCE_COMMAND")
    if given:
        try:
            return [str(arg) for arg in json.loads(given)]
        except (ValueError, TypeError):
            pass
    return ["pytest", *config.invocation_params.args]


def _isolation(config, spec: str) -> str:
    """Where the implementation runs, in words."""
    if spec.startswith("cmd:"):
        return "in a process of its own, over JSON lines"
    if spec == "reference":
        return "in the suite's process (it is the suite's own oracle)"
    if config.getoption("--conformance-in-process"):
        return "in the suite's process, unprotected (--conformance-in-process)"
    return "in a worker process of its own"


def _worker_id(config) -> str | None:
    """The xdist worker this process is, or None for the process that writes the reports."""
    return getattr(config, "workerinput", {}).get("workerid")


def check_settings(profile: dict, max_examples: int | None, *, shrink: bool):
    """The Hypothesis settings of the suite's generated checks: the profile's, over
    Hypothesis's own defaults (not over whatever profile the session loaded), every health
    check suppressed. They are applied to each check alone (`generated_with`), never loaded
    for the session, so a user's own Hypothesis tests in the same run keep theirs."""
    from hypothesis import HealthCheck, Phase, settings
    values = dict(profile)
    if max_examples:
        values["max_examples"] = max_examples
    if not shrink:
        values["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    return settings(settings.get_profile("default"), suppress_health_check=list(HealthCheck),
                    **values)


def generated_with(test, chosen):
    """A generated check (`@given(data=st.data())`, SPEC.md, "The conformance suite") given
    anew from its inner test, under the settings `chosen`: the check's module function is
    left as it was, so the next session (or fuzz's batches) wraps it again. The database key
    and the derandomized seed come from the inner test, so they are the same as before."""
    from hypothesis import given
    from hypothesis import strategies as st
    return chosen(given(data=st.data())(test.hypothesis.inner_test))


def is_generated(item) -> bool:
    """Whether a collected check is one Hypothesis drives."""
    return hasattr(getattr(item, "obj", None), "hypothesis")


RUN_KEY = pytest.StashKey["Run | None"]()
SPECS_KEY = pytest.StashKey["list[str]"]()


def pytest_configure(config):
    specs = config.getoption("--impl") or []
    config.stash[SPECS_KEY] = specs
    config.stash[RUN_KEY] = None
    if len(specs) != 1:
        return  # none: inert; several: for benchmarks/ (the suite refuses them at collection)
    from gradient_conformance import resource
    from gradient_conformance.conformance.transports.loading import LoadFailed, load
    run = Run(config, specs[0])
    run.known = _known(config.getoption("--conformance-known"), run.base)
    run.settings = check_settings(PROFILES[run.profile],
                                  config.getoption("--conformance-max-examples"),
                                  shrink=not config.getoption("--conformance-no-shrink"))
    if not any(resource("cases").rglob("*.ir")):
        raise pytest.UsageError(f"the package's case files are missing from "
                                f"{resource('cases')}: a broken install")
    from gradient_conformance.conformance.transports.confinement import (
        Confinement,
        default_memory_limit,
    )
    confinement = Confinement(
        config.getoption("--conformance-memory-limit") or default_memory_limit(_sharing(config)),
        config.getoption("--conformance-sandbox"),
        tuple(config.getoption("--conformance-pass-env")))
    try:
        run.impl = load(run.spec, timeout=config.getoption("--conformance-case-timeout"),
                        load_timeout=config.getoption("--conformance-load-timeout"),
                        in_process=config.getoption("--conformance-in-process"),
                        base=str(run.base), confinement=confinement)
    except LoadFailed as problem:
        raise pytest.UsageError(f"--impl={run.spec}: could not load it: {problem}") from None
    if config.hook.pytest_gradient_conformance_keep_cases() is False:
        run.cases_dir = None
    config.stash[RUN_KEY] = run
    config.pluginmanager.register(run, "gradient-conformance-run")


def _known(path: str | None, base: pathlib.Path):
    """The entries of the --known file, or a usage error naming its line and the problem."""
    if not path:
        return None
    from gradient_conformance.conformance.known import Known, parse_known
    try:
        return Known(parse_known((base / path).read_text(), path))
    except (OSError, UnicodeDecodeError) as problem:
        raise pytest.UsageError(f"--known {path}: could not read it: "
                                f"{getattr(problem, 'strerror', None) or problem}") from None
    except ValueError as problem:
        raise pytest.UsageError(f"--known {problem}") from None


def _sharing(config) -> int:
    """How many processes run checks at once: xdist's workers, the same count in each."""
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT") or getattr(config.option,
                                                                    "numprocesses", None)
    try:
        return max(int(str(count)), 1)
    except (TypeError, ValueError):
        return 1


def pytest_unconfigure(config):
    run = config.stash.get(RUN_KEY, None)
    if run is not None and run.impl is not None:
        run.impl.close()


def pytest_report_header(config):
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        return None
    return [f"implementation: {run.impl.label} ({run.spec}), {_isolation(config, run.spec)}",
            f"capabilities: {json.dumps(run.impl.capabilities)}",
            *(["integer division traps, as declared: no run that divides by zero or takes "
               "-2^31 over -1 is sent to it"]
              if run.impl.capabilities["integer_division_traps"] else []),
            f"profile: {run.profile}; divergences saved in {_shown(run.cases_dir, run.base)}/"]


# --- collection ------------------------------------------------------------------------------


def is_check(item) -> bool:
    """Whether a collected test is one of the suite's checks: a test that takes this
    plugin's `impl` fixture. The installed checks do; so does a check file of the user's
    own given on the command line. A test that is given an `impl` of its own (a parameter,
    or a fixture its module defines) is the user's own test, not a check."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "impl" in getattr(item, "fixturenames", ()) and "impl" not in params and not \
        hasattr(getattr(item, "module", None), "impl")


def stable_id(item) -> str:
    """The id an xfails or skips entry matches: the check's module and name and its
    parameter (`test_cases.py::test_case_file[examples/max_tie.ir]`), the same wherever the
    implementation or the suite is installed."""
    return f"{pathlib.Path(item.path).name}::{item.name}"


_ENTRY = re.compile(r"(?:(?P<module>[\w.-]+\.py)(?:::|$))?(?:(?P<check>[A-Za-z_]\w*)"
                    r"(?:\[(?P<param>[^\[\]]+)\])?)?")


@dataclass(frozen=True)
class Entry:
    """One line of an xfails or skips file, read as the parts of a stable id it names
    (SPEC.md, "The conformance suite"): a module (`test_tape.py`), a check
    (`test_forward.py::test_exact_programs_bit_for_bit`, or its name alone), one instance
    (`test_cases.py::test_case_file[examples/max_tie.ir]`), or a parameter alone (a case
    file, `examples/max_tie.ir`). An entry matches an id whose parts are those; it is never
    a substring of one."""

    text: str
    module: str | None
    check: str | None
    param: str | None

    @classmethod
    def parse(cls, text: str) -> Entry | None:
        found = _ENTRY.fullmatch(text)
        if found and (found["module"] or found["check"]):
            return cls(text, found["module"], found["check"], found["param"])
        if "[" not in text and "]" not in text and "::" not in text and " " not in text:
            return cls(text, None, None, text)  # a parameter alone: a case file's path
        return None

    def matches(self, item) -> bool:
        module = pathlib.Path(item.path).name
        check, _, param = item.name.partition("[")
        shown = param[:-1] if param.endswith("]") else None
        return ((self.module is None or self.module == module)
                and (self.check is None or self.check == check)
                and (self.param is None or self.param == shown))


def _entries(path: str | None, base: pathlib.Path) -> list[Entry]:
    if not path:
        return []
    file = base / path
    try:
        lines = file.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as problem:
        raise pytest.UsageError(f"could not read {path}: "
                                f"{getattr(problem, 'strerror', None) or problem}") from None
    entries = []
    for number, line in enumerate(lines, start=1):
        text = line.split("#")[0].strip()
        if not text:
            continue
        entry = Entry.parse(text)
        if entry is None:
            raise pytest.UsageError(f"{path}, line {number}: {text!r} is not a check's id or "
                                    "a part of one (MODULE.py, MODULE.py::CHECK, "
                                    "CHECK[PARAMETER], or a case file's path)")
        entries.append(entry)
    return entries


def pytest_collection_modifyitems(session, config, items):
    suite = [item for item in items if is_check(item)]
    if not suite:
        return
    specs, run = config.stash[SPECS_KEY], config.stash[RUN_KEY]
    if not specs:
        raise pytest.UsageError(f"the conformance suite needs an implementation: {USAGE}")
    if len(specs) > 1:
        raise pytest.UsageError("the conformance suite checks one implementation per run; "
                                "gradient-conformance matrix runs it against several")
    base = run.base
    xfails = _entries(config.getoption("--conformance-xfails-file"), base)
    skips = _entries(config.getoption("--conformance-skips-file"), base)
    used = set()
    for item in suite:
        for entry in skips:
            if entry.matches(item):
                used.add(entry.text)
                item.add_marker(pytest.mark.skip(reason="listed in the skips file: "
                                                 f"{entry.text}"))
        for entry in xfails:
            if entry.matches(item):
                used.add(entry.text)
                item.add_marker(pytest.mark.xfail(reason="listed in the xfails file: "
                                                  f"{entry.text}", strict=True))
    for item in suite:
        if is_generated(item):
            if "data" not in inspect.signature(item.obj.hypothesis.inner_test).parameters:
                raise pytest.UsageError(f"{stable_id(item)}: a generated check draws from "
                                        "Hypothesis through one argument, "
                                        "@given(data=st.data())")
            item.obj = generated_with(item.obj, run.settings)
    for stale in sorted({e.text for e in xfails + skips} - used):
        config.issue_config_time_warning(pytest.PytestWarning(
            f"the xfails or skips file names {stale!r}, which matches no check's id in "
            "this run: a stale entry"), stacklevel=2)
    # The cheapest and most telling first: case files (a second kills most faults), then
    # each module by its RANK. A stable sort of the collection order, the same in every
    # xdist worker.
    order = {id(item): k for k, item in enumerate(items)}
    items.sort(key=lambda item: (rank(item), order[id(item)]))


def rank(item) -> tuple[int, int]:
    """Where a collected test runs: a user's own tests first, as collected; then the case
    files; then the other checks that Hypothesis does not drive (fixed programs, a second
    each at most); then each module's generated checks by its RANK
    (conformance/checks/__init__.py)."""
    if not is_check(item):
        return (-1, 0)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "path" in params or "name" in params:
        return (0, 0)
    module_rank = getattr(item.module, "RANK", 9)
    return (2, module_rank) if is_generated(item) else (1, module_rank)


# --- running ---------------------------------------------------------------------------------


TALLY_KEY = pytest.StashKey["object"]()
GUARDED_KEY = pytest.StashKey["object"]()


@pytest.fixture
def impl(request):
    """The implementation under test, as this check calls it (the suite's checks take it as
    a fixture): its Guarded view, whose state is the check's own record."""
    run = request.config.stash.get(RUN_KEY, None)
    if run is None:
        raise pytest.UsageError(f"the conformance suite needs an implementation: {USAGE}")
    return request.node.stash[GUARDED_KEY]


@pytest.fixture
def tally(request):
    """What this check measures as it runs (conformance/running.py, `Tally`): new for each
    check, and read when it ends."""
    return request.node.stash[TALLY_KEY]


def check_name(item) -> str:
    return getattr(item, "originalname", None) or item.name


def pytest_runtest_setup(item):
    run = item.config.stash.get(RUN_KEY, None)
    if run is None or not is_check(item):
        return
    from gradient_conformance.conformance.running import Tally
    from gradient_conformance.conformance.transports.loading import Guarded
    tally = item.stash[TALLY_KEY] = Tally(generated=is_generated(item),
                                          guided=run.guided)
    item.stash[GUARDED_KEY] = Guarded(run.impl, tally)
    if run.known is not None and tally.generated:
        check = check_name(item)
        tally.expected = lambda finding: run.known.explains_finding(check, finding)
    needs = getattr(item.module, "PROTOCOL_FUNCTION", "build")
    if not run.impl.provides(needs):
        pytest.skip(f"{run.impl.label} defines no {needs}(): these checks are for "
                    "implementations that do (gradient-conformance spec \"The protocol\")")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Put what the check saw on its report: the outcome under its check's name, its
    divergence (its case file saved, and shown as the failure's text), the cases it ran per
    op, and its figures."""
    report = yield
    run = item.config.stash.get(RUN_KEY, None)
    if run is None or not is_check(item):
        return report
    check = check_name(item)
    record = None
    if hasattr(report, "wasxfail"):
        record = {"check": check, "outcome": "xfailed"}
    elif call.when == "call":
        tally = item.stash[TALLY_KEY]
        _stop_if_it_keeps_hanging(run, item, tally)
        record = {"check": check, "outcome": report.outcome, **tally.record()}
        if run.impl is not None:
            run.impl.sweep()
            ended = run.impl.ended
            now = (ended.left_behind, ended.memory)
            if now != run.ended_sent:
                record["ended"] = [now[0] - run.ended_sent[0], now[1] - run.ended_sent[1]]
                run.ended_sent = now
        if report.failed:
            d = _divergence(run, item.stash[GUARDED_KEY], check, stable_id(item),
                            call.excinfo, tally,
                            report.longreprtext)
            record["divergence"] = d
            record["more"] = [_explained(run, item.stash[GUARDED_KEY], check,
                                         stable_id(item), finding) for finding in tally.more]
        if run.known is not None:
            _sort_known(run, report, record, tally, call.excinfo)
    elif report.outcome != "passed":  # a skip or an error in setup, or an error in teardown
        record = {"check": check, "outcome": "skipped" if report.skipped else "failed"}
    if record is not None:
        if record.get("divergence") is not None:
            from gradient_conformance.reports.records import divergence_to_dict
            from gradient_conformance.reports.terminal import terminal_text
            d, more = record["divergence"], record.pop("more", [])
            if d.source or d.elements:
                report.longrepr = "\n\n".join(
                    [terminal_text(d)] + [f"--- another divergence of this check, of another "
                                          f"signature ({k} of {len(more)}) ---\n"
                                          + terminal_text(m) for k, m in enumerate(more, 1)])
            record["divergence"] = divergence_to_dict(d)
            if more:
                record["more"] = [divergence_to_dict(m) for m in more]
        if report.skipped and isinstance(report.longrepr, tuple):
            record["skip"] = str(report.longrepr[2]).removeprefix("Skipped: ")
        report.user_properties.append((PROPERTY, json.dumps(record)))
    return report


def _sort_known(run, report, record: dict, tally, excinfo) -> None:
    """SPEC.md, "Known divergences": the check's divergences that a --known entry names are
    expected (the check is an xfail naming the entries) unless a new one is among them,
    which fails it alone. A check whose every case showed a known divergence (Hypothesis's
    Unsatisfiable, once each was passed over) found nothing new."""
    matched = set(tally.matched)
    found = [d for d in [record.pop("divergence", None), *record.pop("more", [])] if d]
    if excinfo is not None and matched and type(excinfo.value).__name__ == "Unsatisfiable":
        found = []  # every case was a known divergence, passed over: nothing else to say
    news = []
    for d in found:
        named = [v.get("name") for v in d.diagnosis.get("variants", []) if isinstance(v, dict)]
        entry = run.known.explains(d.signature, named)
        if entry is None:
            news.append(d)
        else:
            matched.add(entry)
    if matched:
        record["known"] = sorted(matched)
    if news:
        record["divergence"], record["more"] = news[0], news[1:]
    elif matched and report.outcome in ("passed", "failed"):
        report.outcome = "skipped"
        report.wasxfail = f"known divergences: {', '.join(sorted(matched))}"
        record["outcome"] = "xfailed"


def _diverged(error: BaseException, kind: type):
    """The divergence a check raised: the error itself, or (when Hypothesis found several
    distinct failures and raised them as a group) the first of the group's."""
    work = [error]
    while work:
        error = work.pop(0)
        if isinstance(error, kind):
            return error
        if isinstance(error, BaseExceptionGroup):
            work.extend(error.exceptions)
    return None


HUNG_CHECKS = 3  # checks in a row in which the implementation timed out: the run stops


def _stop_if_it_keeps_hanging(run, item, tally) -> None:
    """An implementation that timed out in HUNG_CHECKS checks in a row (a build that never
    returns, say) would cost a timeout in every check left: the run stops there, as -x
    would, saying why. The checks it did not reach did not run; none passes."""
    run.hung = run.hung + 1 if tally.timed_out else 0
    if run.hung >= HUNG_CHECKS:
        item.session.shouldfail = (f"the implementation timed out in {HUNG_CHECKS} checks in a "
                                   "row, so the run stops here: the checks after them did not "
                                   "run")


def _divergence(run, guarded, check: str, test_id: str, excinfo, tally, text: str):
    """The divergence of a failed check: the one it raised, or (when the implementation
    made the suite stop shrinking) the last one it found, or its failure's text alone."""
    from gradient_conformance.conformance import divergence
    from gradient_conformance.conformance.running import Diverged
    from gradient_conformance.conformance.transports.loading import Abandoned
    found = _diverged(excinfo.value, Diverged) if excinfo is not None else None
    if found is not None:
        return _explained(run, guarded, check, test_id, found.finding)
    if excinfo is not None and excinfo.errisinstance(Abandoned) and tally.last is not None:
        d = _explained(run, guarded, check, test_id, tally.last)
        d.description = "\n".join(filter(None, [d.description, f"({excinfo.value})"]))
        return d
    return divergence.undescribed(check, test_id, text)


def _explained(run, guarded, check: str, test_id: str, finding):
    """A finding reduced (conformance/reduce.py, unless --no-shrink), described, explained
    (diagnosis, then location: its own stage) and saved as a case file."""
    original = finding.reading.source if finding.reading is not None else ""
    from gradient_conformance.conformance import divergence
    from gradient_conformance.conformance.explain import Explainer
    from gradient_conformance.conformance.reduce import Reduction, reduce_finding
    reduction = None
    if not run.config.getoption("--conformance-no-shrink"):
        # Once per signature and test: fuzz's batches find the same divergence again and
        # again, and keep the smallest of each signature.
        key = (test_id, *divergence.subject(finding))
        if key in run.reduced:
            reduction = Reduction(finding, reason="a divergence of this signature was reduced "
                                  "earlier in this run")
        else:
            run.reduced.add(key)
            reduction = reduce_finding(finding, guarded)
            finding = reduction.finding
    d = divergence.describe(check, test_id, finding)
    if reduction is not None:
        d.reduction = divergence.visible(reduction.line())
        if reduction.after < reduction.before:
            d.original = divergence.visible(original)
    if run.explainer is None:
        run.explainer = Explainer()
    run.explainer.explain(d, finding, guarded)
    if run.cases_dir is not None:
        divergence.save(d, run.cases_dir, run.spec, run.base)
    return d


MORE_LOOKS = 3  # a generated check's further looks for divergences of other signatures


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A generated check that found a divergence looks again, for divergences of other
    signatures, with what is left of its budget of cases: the divergences it has found are
    passed over (as Hypothesis's reject), so that a second bug in the same check is found
    and reported rather than hidden by the first (SPEC.md, "Diagnosis"). Each
    is kept on the check's tally (`more`); the check fails with its first. Not under -x
    (or --maxfail): a run told to stop at its first failures wants no more."""
    run = pyfuncitem.config.stash.get(RUN_KEY, None)
    if run is None or not is_check(pyfuncitem) or not is_generated(pyfuncitem) or \
            pyfuncitem.config.getoption("maxfail"):
        return (yield)
    try:
        return (yield)
    except BaseException as error:
        from gradient_conformance.conformance.running import Diverged
        first = _diverged(error, Diverged)
        if first is not None:
            _look_again(run, pyfuncitem, first.finding)
        raise


def _look_again(run, item, first) -> None:
    import zlib

    from hypothesis import seed, settings

    from gradient_conformance.conformance import divergence
    from gradient_conformance.conformance.running import Diverged
    tally = item.stash[TALLY_KEY]
    found = [first]
    tally.subject = divergence.subject
    for look in range(1, run.more_looks + 1):
        left = run.settings.max_examples - tally.cases
        if left <= 0 or tally.abandon:
            return
        tally.known = {divergence.subject(f) for f in found}
        tally.last = None  # counting cases again: these are new ones
        again = seed(zlib.crc32(f"{stable_id(item)}/{look}".encode()))(
            generated_with(item.obj, settings(run.settings, max_examples=left, database=None)))
        arguments = {name: item.funcargs[name] for name in
                     inspect.signature(again).parameters if name in item.funcargs}
        try:
            again(**arguments)
        except Exception as error:  # noqa: BLE001 - anything else ends the looking
            other = _diverged(error, Diverged)
            if other is None:
                return
            found.append(other.finding)
            tally.more.append(other.finding)
        else:
            return
        finally:
            tally.known = set()
            tally.last = first


def _shown(path: pathlib.Path, base: pathlib.Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)
