"""The suite's session in the process that writes the reports: the implementation, what every
check saw (its record, from this process or an xdist worker), what is said as each check
ends, and the reports and summary at the end. docs/reports.md, "Reports".

Imported by the plugin in every pytest run of the venv, so it imports nothing heavy until a
run of the suite asks for it.
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from gradient_conformance.conformance.collection import check_name, is_check, stable_id
from gradient_conformance.conformance.options import (
    DEFAULT_OUTPUT,
    MORE_LOOKS,
    PROFILES,
    PROPERTY,
)

if TYPE_CHECKING:
    from gradient_conformance.conformance.failure import FailureStage, Staged
    from gradient_conformance.conformance.known import Known
    from gradient_conformance.conformance.tallies import Tally
    from gradient_conformance.conformance.totals import Totals
    from gradient_conformance.conformance.transports.loading import Implementation
    from gradient_conformance.reports.records import Divergence, Report

HUNG_CHECKS = 3  # checks in a row in which the implementation timed out: the run stops


def versions() -> dict[str, str]:
    """What a run's cases and answers depend on besides the implementation: Python, numpy,
    Hypothesis, and this package where it is installed (a report's `versions`; `grade`
    states them for its class)."""
    from importlib import metadata

    import hypothesis
    import numpy
    found = {"python": sys.version.split()[0], "numpy": numpy.__version__,
             "hypothesis": hypothesis.__version__}
    try:
        found["gradient-conformance"] = metadata.version("gradient-conformance")
    except metadata.PackageNotFoundError:
        pass
    return found


class Run:
    """The suite's state in this process: the implementation, and (where the reports are
    written) what every check saw."""

    def __init__(self, config: pytest.Config, spec: str):
        self.config, self.spec = config, spec
        self.base = pathlib.Path(config.invocation_params.dir).resolve()
        self.profile = config.getoption("--conformance-profile")
        # A derandomized profile draws the same cases every run; the others steer towards
        # the conditions they rarely take (tallies.Tally.reach).
        self.guided = not PROFILES[self.profile].get("derandomize", False)
        self.cases_dir: pathlib.Path | None = self._cases_dir()
        self.started, self.clock = time.time(), time.monotonic()
        self.totals: Totals | None = None  # made at the first record (Totals imports the oracle)
        self.hung = 0  # checks in a row in which the implementation timed out
        self.written: list[pathlib.Path] = []
        self.impl: Implementation | None = None
        self.settings: Any = None  # the checks' Hypothesis settings (options.check_settings)
        self.stage: FailureStage | None = None  # what follows a divergence (failure.py)
        # A failing generated check's further looks (pytest_pyfunc_call); fuzz, which keeps
        # looking batch after batch, wants none.
        self.more_looks = MORE_LOOKS
        self.interrupted = ""  # what happened, when the run was cut short
        self.ended_sent = (0, 0)  # this process's Ended, as far as its records have told
        self.reported: set[str] = set()  # the node ids a record came for
        # The crash causes (type at place) whose message this process has shown in full.
        self.causes_shown: set[str] = set()
        self.known: Known | None = None  # the entries of --known (known.py), when given
        self.known_written: pathlib.Path | None = None  # where --write-known wrote
        # check -> its area, topic -> its area (areas.areas, topic_areas): read at the first
        # record, once a process.
        self.areas: tuple[dict[str, str], dict[str, str]] | None = None

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

    def area_of(self, item: pytest.Item, check: str) -> str:
        """The area of the rubric this test counts in (docs/grading.md, "The rubric"): from
        its check's docstring, its topic or its rule's row (areas.area_of), the checks'
        areas read once a process."""
        from gradient_conformance.conformance.areas import (
            area_of,
            areas,
            topic_areas,
        )
        if self.areas is None:
            try:
                self.areas = (areas(), topic_areas())
            except ValueError:  # a check citing no section: no area, never a broken run
                self.areas = ({}, {})  # (tests/test_grade.py holds every check to one)
        callspec = getattr(item, "callspec", None)
        return area_of(check, dict(callspec.params) if callspec is not None else {},
                       *self.areas)

    def record(self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport,
               tally: Tally | None, staged: Staged | None) -> dict | None:
        """The record of a check's report (None for a setup or teardown that passed): its
        outcome under its check's name, what it measured, and its divergences as the failure
        stage left them where the check ran (failure.py, `after_check`), as JSON; a
        divergence's text becomes the failure's text. A check that found only divergences
        --known expects is an expected failure. Nothing here runs the implementation."""
        check = check_name(item)
        area = self.area_of(item, check)
        if hasattr(report, "wasxfail"):
            return {"check": check, "area": area, "outcome": "xfailed"}
        if call.when != "call" or tally is None:
            if report.outcome == "passed":
                return None
            return {"check": check, "area": area,
                    "outcome": "skipped" if report.skipped else "failed",
                    **self._skip_reason(report)}
        self._stop_if_it_keeps_hanging(item, tally)
        record: dict = {"check": check, "area": area, "outcome": report.outcome,
                        **tally.record()}
        if self.impl is not None:
            self.impl.sweep()
            ended = self.impl.ended
            now = (ended.left_behind, ended.memory)
            if now != self.ended_sent:
                record["ended"] = [now[0] - self.ended_sent[0], now[1] - self.ended_sent[1]]
                self.ended_sent = now
        from gradient_conformance.conformance import divergence
        from gradient_conformance.conformance.failure import Staged
        found: list[Divergence] = []
        error = call.excinfo.value if call.excinfo is not None else None
        staged = staged if staged is not None else Staged()
        if report.failed and self.stage is not None:
            found = staged.found or [divergence.undescribed(check, stable_id(item),
                                                            report.longreprtext)]
            if staged.problem:
                found[0].description = "\n".join(filter(None, [found[0].description,
                                                                f"({staged.problem})"]))
        if self.known is not None and self.stage is not None:
            sorted_ = self.stage.sort_found(
                found, staged.matched, staged.revoked,
                unsatisfiable=type(error).__name__ == "Unsatisfiable")
            found = sorted_.new
            if found and report.outcome == "passed":  # a known entry the experiment refuted
                report.outcome = "failed"
                record["outcome"] = "failed"
            if sorted_.matched:
                record["known"] = sorted_.matched
            if sorted_.expected and report.outcome in ("passed", "failed"):
                report.outcome = "skipped"
                report.wasxfail = f"known divergences: {', '.join(sorted_.matched)}"
                record["outcome"] = "xfailed"
        if found:
            from gradient_conformance.reports.records import divergence_to_dict
            first, more = found[0], found[1:]
            if first.source or first.elements:
                report.longrepr = "\n\n".join(
                    [self._shown(first)] + [f"--- another divergence of this check, of "
                                            f"another signature ({k} of {len(more)}) ---\n"
                                            + self._shown(m) for k, m in enumerate(more, 1)])
            record["divergence"] = divergence_to_dict(first)
            if more:
                record["more"] = [divergence_to_dict(m) for m in more]
        return {**record, **self._skip_reason(report)}

    def _shown(self, d: Divergence) -> str:
        """A divergence's text for the terminal: a crash's message in full the first time
        this process shows its cause (type and place), then only the cause, named."""
        from gradient_conformance.reports.records import crash_cause
        from gradient_conformance.reports.terminal import terminal_text
        cause = crash_cause(d)
        key = f"{cause[0]} at {cause[1]}" if cause is not None else ""
        shown = key if key in self.causes_shown else ""
        if key:
            self.causes_shown.add(key)
        return terminal_text(d, shown_before=shown)

    @staticmethod
    def _skip_reason(report: pytest.TestReport) -> dict:
        if report.skipped and isinstance(report.longrepr, tuple):
            return {"skip": str(report.longrepr[2]).removeprefix("Skipped: ")}
        return {}

    def _stop_if_it_keeps_hanging(self, item: pytest.Item, tally: Tally) -> None:
        """An implementation that timed out in HUNG_CHECKS checks in a row (a build that
        never returns, say) would cost a timeout in every check left: the run stops there, as
        -x would, saying why. The checks it did not reach did not run; none passes."""
        self.hung = self.hung + 1 if tally.timed_out else 0
        if self.hung >= HUNG_CHECKS:
            item.session.shouldfail = (f"the implementation timed out in {HUNG_CHECKS} checks "
                                       "in a row, so the run stops here: the checks after them "
                                       "did not run")

    # Hooks of this run, registered as a plugin of its own when --impl is given.

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if worker_id(self.config) is not None or self.impl is None:
            return
        self.config.hook.pytest_gradient_conformance_loaded(
            implementation=self.impl.described())
        if self.config.getoption("dist", "no") != "no":
            self.impl.close()  # the xdist controller runs no check: it only needed to ask

    def pytest_runtest_logreport(self, report):
        """Where the reports are written (not in an xdist worker), take each check's
        record, from this process or from a worker."""
        if worker_id(self.config) is not None:
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
        if worker_id(self.config) is not None:
            return
        if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
            # Cut short, even in its first check: a report that says so, and what did not run
            # (issue 53: an INTERNALERROR's reports said nothing of it, as if complete).
            left: dict[str, list[int]] = {}  # check -> [instances not run, instances]
            for item in (i for i in session.items if is_check(i)):
                counts = left.setdefault(check_name(item), [0, 0])
                counts[0] += item.nodeid not in self.reported
                counts[1] += 1
            unrun = [f"{name}" + (f" ({n} of {total})" if total > 1 else "")
                     for name, (n, total) in sorted(left.items()) if n]
            how = "interrupted (Ctrl-C, or a signal)" \
                if exitstatus == pytest.ExitCode.INTERRUPTED else \
                "ended by an internal error of pytest or a plugin (INTERNALERROR, above)"
            self.interrupted = (
                f"{how} after {time.monotonic() - self.clock:.0f} s; "
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
        if worker_id(self.config) is not None or self.totals is None:
            return
        from gradient_conformance.reports.records import counted
        from gradient_conformance.reports.terminal import (
            compared_lines,
            failure_stage_lines,
            figures_lines,
        )
        lines = figures_lines(self.totals.figures)
        lines += compared_lines(self.totals.compared, self.totals.left_out)
        if self.stage is not None:
            lines += failure_stage_lines(self.totals.divergences, time.monotonic() - self.clock,
                                         self.stage.budget.seconds)
        if any(self.totals.ended):
            lines.append(f"contained: {self.confinement_words()}")
        if self.impl is not None and self.impl.restarts:
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
            terminalreporter.write_line(f"report written: {shown(path, self.base)}")
        if self.known_written is not None:
            from gradient_conformance.conformance.known import entry_for
            unnamed = sum(1 for d in self.totals.divergences if entry_for(d) is None)
            terminalreporter.write_line(
                f"known divergences written: {shown(self.known_written, self.base)} (--known "
                "reads it)" + (f"; left out: {counted(unnamed, 'divergence')} whose signature "
                               "names no subject (the file says why)" if unnamed else ""))
        saved = [d for d in self.totals.divergences if d.case_file]
        if saved:
            terminalreporter.write_line(
                f"{counted(len(saved), 'divergence')} saved as case files in "
                f"{shown(self.cases_dir or self.base, self.base)}/; each failure above gives "
                "the command "
                "that replays it")

    def report(self) -> Report:
        from gradient_conformance.conformance.totals import Totals, coverage
        from gradient_conformance.reports.records import Report
        totals = self.totals if self.totals is not None else Totals()
        return Report(
            implementation=self.impl.described() if self.impl is not None else {},
            profile=self.profile,
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started)),
            seconds=time.monotonic() - self.clock, checks=totals.outcomes, areas=totals.areas,
            cases=totals.cases,
            skips={c: sorted(r) for c, r in totals.skips.items()}, ops=totals.ops,
            compared=totals.compared, left_out=totals.left_out,
            conditions=totals.conditions,
            coverage=coverage(totals.conditions, totals.generated),
            ulps=totals.ulps, divergences=totals.divergences, versions=versions(),
            command=shlex.join(_command_line(self.config)),
            isolation=isolation(self.config, self.spec), interrupted=self.interrupted,
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


def isolation(config, spec: str) -> str:
    """Where the implementation runs, in words."""
    if spec.startswith("cmd:"):
        return "in a process of its own, over JSON lines"
    if spec == "reference":
        return "in the suite's process (it is the suite's own oracle)"
    if config.getoption("--conformance-in-process"):
        return "in the suite's process, unprotected (--conformance-in-process)"
    return "in a worker process of its own"


CONFINEMENT_INPUT = "gradient_conformance_confinement"  # an xdist worker's, from its controller


def decided_confinement(config, sharing: int):
    """How the implementation is confined in this run, decided once (docs/isolation.md,
    "Decided once"): by the process the user started, from the options; an xdist worker
    takes its controller's decision and never decides again. ValueError: a usage error."""
    from gradient_conformance.conformance.transports.confinement import Confinement
    handed = getattr(config, "workerinput", {}).get(CONFINEMENT_INPUT)
    if handed is not None:
        return Confinement.from_text(handed)
    return Confinement.asked(config.getoption("--conformance-memory-limit"),
                             config.getoption("--conformance-sandbox"),
                             config.getoption("--conformance-pass-env"), sharing,
                             config.getoption("--conformance-sandbox-bind")).resolved()


def hand_on_confinement(node, run) -> None:
    """Give an xdist worker this process's decided confinement (its `workerinput`)."""
    if run is not None and run.impl is not None and run.impl.confinement is not None:
        node.workerinput[CONFINEMENT_INPUT] = run.impl.confinement.as_text()


def foreign_configuration(config, run) -> str | None:
    """What of the user's own pytest setup this run loaded into the suite's process (a
    configuration file, conftest.py files), in one line; None when nothing was, as under
    gradient-conformance, which loads none."""
    if run is None:
        return None
    package = pathlib.Path(__file__).resolve().parent
    conftests = sorted({str(getattr(p, "__file__", "")) for p in
                        config.pluginmanager.get_plugins()
                        if str(getattr(p, "__file__", "")).endswith("conftest.py") and
                        package not in pathlib.Path(str(p.__file__)).resolve().parents})
    ini = config.inipath if config.inipath is not None and \
        str(config.inipath) != os.devnull else None
    if not conftests and ini is None:
        return None
    loaded = [*([f"the configuration file {ini}"] if ini else []),
              *(f"{path}" for path in conftests)]
    return ("not isolated from your pytest setup: this run loaded " + ", ".join(loaded)
            + " into the suite's own process, where they can change what it checks and its "
            "verdict (pytest loads them by design; gradient-conformance loads none)")


def worker_id(config) -> str | None:
    """The xdist worker this process is, or None for the process that writes the reports."""
    return getattr(config, "workerinput", {}).get("workerid")


def shown(path: pathlib.Path, base: pathlib.Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)
