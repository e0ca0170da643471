"""The pytest plugin: `pytest conformance --impl=MODULE`. SPEC.md, "The conformance suite".

Registered through the `pytest11` entry point (conformance/conftest.py stands in when the
project is not installed). Inert unless `--impl` is given: the checks then skip, saying so.
"""

from __future__ import annotations

import datetime
import pathlib
import time
import warnings

import pytest
from hypothesis import HealthCheck, Phase, settings

from reports.html import render
from reports.records import Report, to_json

from .implementation import load
from .record import RECORDER

PROFILES = {
    # Derandomized, so a CI run is repeatable; sized so the whole suite stays near a minute.
    "ci": dict(max_examples=200, derandomize=True, deadline=None, database=None),
    "dev": dict(max_examples=100, deadline=None),
    "nightly": dict(max_examples=2000, deadline=None),
}
for _name, _values in PROFILES.items():
    settings.register_profile(f"conformance-{_name}", suppress_health_check=list(HealthCheck),
                              **_values)


def pytest_addoption(parser):
    group = parser.getgroup("conformance", "gradient conformance suite")
    group.addoption("--impl", action="append", default=None,
                    help="the implementation under test: reference, a "
                    "module name, a path to a .py file, or cmd:'PROGRAM ARGS'")
    group.addoption("--profile", default="ci", choices=sorted(PROFILES),
                    help="ci (derandomized, about a minute), dev, or nightly (many examples)")
    group.addoption("--max-examples", type=int, default=None,
                    help="Hypothesis examples per check, overriding the profile")
    group.addoption("--no-shrink", action="store_true",
                    help="report failing cases as found, without shrinking them (faster "
                    "against an implementation that hangs)")
    group.addoption("--case-timeout", type=float, default=20.0,
                    help="seconds an implementation may take to build or run one case")
    group.addoption("--xfails-file", default=None, help="test ids expected to fail, one a line")
    group.addoption("--skips-file", default=None, help="test ids to skip, one a line")
    group.addoption("--report", default=None, metavar="PATH.html",
                    help="write the HTML report of the run here")
    group.addoption("--report-json", default=None, metavar="PATH.json",
                    help="write the run as JSON here (schema in SPEC.md, \"Reports\")")
    group.addoption("--cases-out", default=None, metavar="DIR",
                    help="save each divergence as a case file here (default: beside the "
                    "report, in REPORT.cases/, or .conformance/divergences/)")


def pytest_configure(config):
    specs = config.getoption("--impl") or []
    config.conformance_impl = None
    if len(specs) != 1:
        # None: the suite is inert. Several: for benchmarks/, which compares them; the
        # conformance checks refuse to run then (pytest_collection_modifyitems).
        config.conformance_several = len(specs) > 1
        return
    spec = specs[0]
    profile = config.getoption("--profile")
    values = dict(PROFILES[profile])
    if config.getoption("--max-examples"):
        values["max_examples"] = config.getoption("--max-examples")
    if config.getoption("--no-shrink"):
        values["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    settings.register_profile("conformance-run", suppress_health_check=list(HealthCheck),
                              **values)
    settings.load_profile("conformance-run")
    config.conformance_run = Run(spec, profile, _cases_dir(config))
    try:
        config.conformance_impl = load(spec, timeout=config.getoption("--case-timeout"))
    except Exception as problem:  # noqa: BLE001 - whatever the module raised while importing
        raise pytest.UsageError(f"--impl={spec}: could not load it: "
                                f"{type(problem).__name__}: {problem}") from None


def _cases_dir(config) -> pathlib.Path:
    given = config.getoption("--cases-out")
    report = config.getoption("--report") or config.getoption("--report-json")
    if given:
        return pathlib.Path(given)
    if report:
        return pathlib.Path(report).with_suffix(".cases")
    return pathlib.Path(".conformance") / "divergences"


class Run:
    """What the report needs from a pytest run: outcomes per check, and the divergences."""

    def __init__(self, spec: str, profile: str, cases_dir: pathlib.Path):
        self.spec, self.profile, self.cases_dir = spec, profile, cases_dir
        self.started, self.clock = datetime.datetime.now(datetime.UTC), time.monotonic()
        self.outcomes: dict[str, dict[str, int]] = {}
        self.divergences = []
        RECORDER.reset()

    def count(self, check: str, outcome: str) -> None:
        per_check = self.outcomes.setdefault(check, {})
        per_check[outcome] = per_check.get(outcome, 0) + 1

    def report(self, impl) -> Report:
        return Report(
            implementation={"name": impl.name, "version": impl.version, "spec": impl.spec,
                            "capabilities": impl.capabilities},
            profile=self.profile, started=self.started.isoformat(timespec="seconds"),
            seconds=time.monotonic() - self.clock, checks=self.outcomes,
            ops={op: dict(per) for op, per in RECORDER.ops.items()}, ulps=dict(RECORDER.ulps),
            divergences=self.divergences)


def _check_name(item) -> str:
    return getattr(item, "originalname", None) or item.name


def pytest_runtest_setup(item):
    if getattr(item.config, "conformance_impl", None) is not None:
        RECORDER.begin(_check_name(item), item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Count each test's outcome under its check, and turn a failure into a divergence."""
    outcome = yield
    run = getattr(item.config, "conformance_run", None)
    if run is None or getattr(item.config, "conformance_impl", None) is None:
        return
    report, check = outcome.get_result(), _check_name(item)
    if hasattr(report, "wasxfail"):
        RECORDER.pending = None
        run.count(check, "xfailed")
    elif call.when == "call":
        run.count(check, report.outcome)
        divergence = RECORDER.finish(report.failed, report.longreprtext,
                                     impl_spec=run.spec, cases_dir=run.cases_dir)
        if divergence is not None:
            run.divergences.append(divergence)
    elif report.outcome != "passed":  # a skip or an error in setup, or an error in teardown
        run.count(check, "skipped" if report.skipped else "failed")


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    run, impl = getattr(config, "conformance_run", None), getattr(config, "conformance_impl",
                                                                   None)
    if run is None or impl is None:
        return
    report = run.report(impl)
    written = []
    if config.getoption("--report"):
        path = pathlib.Path(config.getoption("--report"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(report))
        written.append(str(path))
    if config.getoption("--report-json"):
        path = pathlib.Path(config.getoption("--report-json"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_json(report))
        written.append(str(path))
    config.conformance_written = written


def pytest_unconfigure(config):
    impl = getattr(config, "conformance_impl", None)
    if impl is not None:
        impl.close()


def pytest_report_header(config):
    impl = getattr(config, "conformance_impl", None)
    if impl is None:
        return None
    return [f"implementation: {impl.label} ({impl.spec})",
            f"capabilities: {impl.capabilities}",
            f"profile: {config.getoption('--profile')}"]


def pytest_terminal_summary(terminalreporter, config):
    if getattr(config, "conformance_impl", None) is None:
        return
    from .checks import SUMMARY
    if SUMMARY:
        terminalreporter.section("conformance figures")
        for line in SUMMARY.values():
            terminalreporter.write_line(line)
    run = getattr(config, "conformance_run", None)
    for path in getattr(config, "conformance_written", []):
        terminalreporter.write_line(f"report written: {path}")
    if run is not None and run.divergences:
        terminalreporter.write_line(f"{len(run.divergences)} divergences saved as case files "
                                    f"in {run.cases_dir}/")


def pytest_generate_tests(metafunc):
    """The implementation is a parameter, so its name stands in every test id."""
    impl = getattr(metafunc.config, "conformance_impl", None)
    if impl is None or "impl" not in metafunc.fixturenames or \
            not metafunc.module.__name__.startswith("conformance."):
        return  # inert: no --impl, or a test that is not one of the suite's
    metafunc.parametrize("impl", [impl], ids=[impl.label.replace(" ", "-")], scope="session",
                         indirect=True)


def _ids(path: str | None) -> set[str]:
    if not path:
        return set()
    lines = pathlib.Path(path).read_text().splitlines()
    return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()}


def pytest_collection_modifyitems(config, items):
    if getattr(config, "conformance_several", False) and any(
            item.nodeid.startswith("conformance/") for item in items):
        raise pytest.UsageError("the conformance suite checks one implementation per run; "
                                "python -m conformance matrix runs it against several")
    if getattr(config, "conformance_impl", None) is None:
        return
    xfails, skips = _ids(config.getoption("--xfails-file")), _ids(config.getoption("--skips-file"))
    seen = set()
    for item in items:
        for wanted in (xfails, skips):
            for test_id in wanted:
                # An id may name one implementation's test ([...] and all) or the test for any.
                if item.nodeid == test_id or item.nodeid.startswith(test_id + "[") \
                        or item.nodeid.endswith(test_id):
                    seen.add(test_id)
                    if wanted is skips:
                        item.add_marker(pytest.mark.skip(reason="listed in --skips-file"))
                    else:
                        item.add_marker(pytest.mark.xfail(reason="listed in --xfails-file",
                                                          strict=True))
    for stale in sorted((xfails | skips) - seen):
        warnings.warn(f"--xfails-file/--skips-file names {stale!r}, which is no test "
                      "of this run: a stale id", pytest.PytestWarning, stacklevel=1)
