"""The pytest plugin: `gradient-conformance --impl=X`, or `pytest --pyargs
gradient_conformance.conformance.checks --impl=X`. docs/suite.md, "The conformance suite".

Installed, pytest loads this module in every pytest run of the venv, so it stays inert until
asked for: importing it costs nothing but pytest, its options carry the `--conformance-`
prefix (only `--impl` has a short name), and nothing heavy (numpy, Hypothesis, Jinja2, the
oracle) is imported until `--impl` is given. Collecting the suite without `--impl` is a usage
error.

This module holds pytest's hooks and nothing else: each calls a stage and passes on what it
returns, as pytest-xdist keeps its session out of its plugin module. The options and the
checks' settings are in options.py, which tests are checks and their order in collection.py,
the session and its reports in session.py, and what follows a divergence in failure.py.

Each check runs where pytest runs it: in this process, or in an xdist worker. Whatever a check
saw (its outcome, its divergences, the cases it ran per op, the figures) rides on its test
report (`user_properties`), so that the process that writes the reports, this one or the
xdist controller, sees every worker's.
"""

from __future__ import annotations

import inspect
import json
import pathlib
from typing import TYPE_CHECKING, Any

import pytest

from gradient_conformance.conformance import collection, options
from gradient_conformance.conformance.collection import check_name, is_check, is_generated
from gradient_conformance.conformance.options import PROFILES, PROPERTY, USAGE
from gradient_conformance.conformance.session import (
    Run,
    decided_confinement,
    foreign_configuration,
    hand_on_confinement,
    isolation,
    shown,
    worker_id,
)
from gradient_conformance.reports.records import quoted

if TYPE_CHECKING:
    from gradient_conformance.conformance.failure import FailureStage
    from gradient_conformance.conformance.known import Known

RUN_KEY = pytest.StashKey["Run | None"]()
SPECS_KEY = pytest.StashKey["list[str]"]()
TALLY_KEY = pytest.StashKey[Any]()
GUARDED_KEY = pytest.StashKey[Any]()
STAGED_KEY = pytest.StashKey[Any]()  # what the failure stage made of the check (failure.py)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(options.Hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


# --- configuration ---------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    specs = config.getoption("--impl") or []
    config.stash[SPECS_KEY] = specs
    config.stash[RUN_KEY] = None
    if len(specs) != 1:
        return  # none: inert; several: for benchmarks/ (the suite refuses them at collection)
    from gradient_conformance import resource
    from gradient_conformance.conformance.explain import Budget
    from gradient_conformance.conformance.failure import FailureStage
    from gradient_conformance.conformance.transports.loading import LoadFailed, load
    run = Run(config, specs[0])
    run.known = _known(config.getoption("--conformance-known"), run.base)
    shrink = not config.getoption("--conformance-no-shrink")
    run.settings = options.check_settings(PROFILES[run.profile],
                                          config.getoption("--conformance-max-examples"),
                                          shrink=shrink)
    if not any(resource("cases").rglob("*.ir")):
        raise pytest.UsageError(f"the package's case files are missing from "
                                f"{resource('cases')}: a broken install")
    try:
        confinement = decided_confinement(config, _sharing(config))
    except ValueError as problem:
        raise pytest.UsageError(f"--impl={run.spec}: {problem}") from None
    try:
        run.impl = load(run.spec, timeout=config.getoption("--conformance-case-timeout"),
                        load_timeout=config.getoption("--conformance-load-timeout"),
                        in_process=config.getoption("--conformance-in-process"),
                        base=str(run.base), confinement=confinement)
    except LoadFailed as problem:
        raise pytest.UsageError(f"--impl={run.spec}: could not load it: {quoted(str(problem))}"
                                ) from None
    if config.hook.pytest_gradient_conformance_keep_cases() is False:
        run.cases_dir = None
    budget = config.getoption("--conformance-stage-budget")
    run.stage = FailureStage(spec=run.spec, base=run.base, cases_dir=run.cases_dir,
                             shrink=shrink, known=run.known,
                             budget=None if budget is None else Budget(budget))
    config.stash[RUN_KEY] = run
    config.pluginmanager.register(run, "gradient-conformance-run")


def _known(path: str | None, base: pathlib.Path) -> Known | None:
    """The entries of the --known file, or a usage error naming its line and the problem."""
    if not path:
        return None
    from gradient_conformance.conformance.known import Known, parse_known
    try:
        from gradient_conformance.reference.cases import read_file
        return Known(parse_known(read_file(base / path), path))
    except (OSError, UnicodeDecodeError) as problem:
        raise pytest.UsageError(f"--known {path}: could not read it: "
                                f"{getattr(problem, 'strerror', None) or problem}") from None
    except ValueError as problem:
        raise pytest.UsageError(f"--known {problem}") from None


def _sharing(config: pytest.Config) -> int:
    """How many processes run checks at once: xdist's workers, the same count in each. This
    run's own xdist says it (a worker's input, or -n in the process that starts them); the
    environment's PYTEST_XDIST_WORKER_COUNT may be an outer pytest's, which started this one."""
    worker = getattr(config, "workerinput", {})
    count = worker.get("workercount") if worker else getattr(config.option, "numprocesses",
                                                             None)
    try:
        return max(int(str(count)), 1)
    except (TypeError, ValueError):
        return 1


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist's, in its controller: each worker takes the confinement decided here."""
    hand_on_confinement(node, node.config.stash.get(RUN_KEY, None))


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(RUN_KEY, None)
    if run is not None and run.impl is not None:
        run.impl.close()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    run = config.stash.get(RUN_KEY, None)
    if run is None or run.impl is None:
        return None
    return [f"implementation: {run.impl.label} ({run.spec}), {isolation(config, run.spec)}",
            f"capabilities: {json.dumps(run.impl.capabilities)}",
            *(["integer division traps, as declared: no run that divides by zero or takes "
               "-2^31 over -1 is sent to it"]
              if run.impl.capabilities["integer_division_traps"] else []),
            *([f"contained: {run.impl.confinement.words()}"]
              if run.impl.confinement is not None else []),
            "profile: " + run.profile + "; divergences saved in "
            + (f"{shown(run.cases_dir, run.base)}/" if run.cases_dir is not None
               else "the fuzzing store")]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Quiet (-q hides the header), a run without the sandbox still says at its start what
    that leaves open (docs/isolation.md, "Isolation")."""
    run = session.config.stash.get(RUN_KEY, None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if run is None or run.impl is None or run.impl.confinement is None or reporter is None \
            or session.config.get_verbosity() >= 0 or worker_id(session.config) is not None:
        return
    if run.impl.confinement.sandbox == "none":
        reporter.write_line(f"contained: {run.impl.confinement.words()}")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under plain pytest, the configuration and conftest.py files it loaded from the user's
    folders, said at the start: they run in the suite's process (docs/isolation.md, "The
    suite's own process")."""
    said = foreign_configuration(session.config, session.config.stash.get(RUN_KEY, None))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if said and reporter is not None and worker_id(session.config) is None:
        reporter.write_line(said)


# --- collection ------------------------------------------------------------------------------


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if not any(is_check(item) for item in items):
        return
    specs, run = config.stash[SPECS_KEY], config.stash[RUN_KEY]
    if len(specs) > 1:
        raise pytest.UsageError("the conformance suite checks one implementation per run; "
                                "gradient-conformance matrix runs it against several")
    if run is None:
        raise pytest.UsageError(f"the conformance suite needs an implementation: {USAGE}")
    collection.prepare(config, items, run.settings, run.base)


# --- running ---------------------------------------------------------------------------------


@pytest.fixture
def impl(request: pytest.FixtureRequest) -> Any:
    """The implementation under test, as this check calls it (the suite's checks take it as
    a fixture): its Guarded view, whose state is the check's own record."""
    run = request.config.stash.get(RUN_KEY, None)
    if run is None:
        raise pytest.UsageError(f"the conformance suite needs an implementation: {USAGE}")
    return request.node.stash[GUARDED_KEY]


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Any:
    """What this check measures as it runs (conformance/tallies.py, `Tally`): new for each
    check, and read when it ends."""
    return request.node.stash[TALLY_KEY]


def pytest_runtest_setup(item: pytest.Item) -> None:
    run = item.config.stash.get(RUN_KEY, None)
    if run is None or run.impl is None or not is_check(item):
        return
    from gradient_conformance.conformance.tallies import Tally
    from gradient_conformance.conformance.transports.loading import Guarded
    tally = item.stash[TALLY_KEY] = Tally(generated=is_generated(item), guided=run.guided)
    item.stash[GUARDED_KEY] = Guarded(run.impl, tally)
    known = run.known
    if known is not None and tally.generated:
        check = check_name(item)
        tally.passover.expected = lambda finding: known.explains_finding(check, finding)
    needs = getattr(getattr(item, "module", None), "PROTOCOL_FUNCTION", "build")
    if not run.impl.provides(needs):
        pytest.skip(f"{run.impl.label} defines no {needs}(): these checks are for "
                    "implementations that do (gradient-conformance spec \"The protocol\")")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Put what the check saw on its report: its record (session.py's `record`), and, for a
    divergence, the failure's text as the terminal shows it. Only serialises: the failure
    stage ran where the check ran (`pytest_pyfunc_call`)."""
    report = yield
    run = item.config.stash.get(RUN_KEY, None)
    if run is None or not is_check(item):
        return report
    record = run.record(item, call, report, item.stash.get(TALLY_KEY, None),
                        item.stash.get(STAGED_KEY, None))
    if record is not None:
        report.user_properties.append((PROPERTY, json.dumps(record)))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """The check, then the failure stage where the check runs (failure.py, `after_check`:
    its time is the check's, and a bug of the stage's is said on its divergence, never an
    INTERNALERROR). A generated check that found a divergence first looks again, for
    divergences of other signatures, with what is left of its budget of cases (failure.py,
    `look_again`; docs/diagnosis.md, "Diagnosis"). Not under -x (or --maxfail): a run told to
    stop at its first failures wants no more. A check that passed without comparing anything
    fails (tallies.require_compared)."""
    run = pyfuncitem.config.stash.get(RUN_KEY, None)
    if run is None or not is_check(pyfuncitem):
        return (yield)
    stage = run.stage
    looks = stage is not None and is_generated(pyfuncitem) and \
        not pyfuncitem.config.getoption("maxfail") and run.more_looks
    tally = pyfuncitem.stash.get(TALLY_KEY, None)
    error: BaseException | None = None
    try:
        result = yield
        # A check that ran to its end must have compared something (docs/suite.md, "What a
        # pass compared"): else it fails, as the suite's failure, never a pass.
        if tally is not None and "tally" in pyfuncitem.fixturenames:
            from gradient_conformance.conformance.tallies import require_compared
            require_compared(tally)
        return result
    except BaseException as raised:
        error = raised
        from gradient_conformance.conformance.failure import diverged
        first = diverged(raised)
        if first is not None and looks and stage is not None:
            _look_again(run, stage, pyfuncitem, first.finding)
        raise
    finally:
        # Not for the user's Ctrl-C, nor for a check the xfails file expects to fail.
        if stage is not None and tally is not None and \
                not isinstance(error, KeyboardInterrupt | SystemExit) and \
                pyfuncitem.get_closest_marker("xfail") is None:
            pyfuncitem.stash[STAGED_KEY] = stage.after_check(
                check_name(pyfuncitem), collection.stable_id(pyfuncitem), error, tally,
                pyfuncitem.stash.get(GUARDED_KEY, None))


def _look_again(run: Run, stage: FailureStage, item: pytest.Function, first: Any) -> None:
    """The check run again by the failure stage, each time with a seed of its own and the
    cases left of its budget."""
    import zlib

    from hypothesis import seed, settings
    tally = item.stash[TALLY_KEY]
    test_id = collection.stable_id(item)

    def again(look: int, cases: int) -> None:
        check = seed(zlib.crc32(f"{test_id}/{look}".encode()))(options.generated_with(
            item.obj, settings(run.settings, max_examples=cases, database=None)))
        check(**{name: item.funcargs[name] for name in inspect.signature(check).parameters
                 if name in item.funcargs})

    stage.look_again(test_id, first, tally, lambda: run.settings.max_examples - tally.cases,
                         again, looks=run.more_looks)
