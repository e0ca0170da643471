"""The suite's options, profiles and hooks, and the Hypothesis settings its checks run under:
what the plugin declares before anything runs. docs/commands.md, "The command line".

Imported by the plugin in every pytest run of the venv, so it imports nothing but pytest.
"""

from __future__ import annotations

import argparse

import pytest

PROFILES = {
    # Derandomized, so a CI run is repeatable; sized so the whole suite stays near a minute.
    "ci": dict(max_examples=200, derandomize=True, deadline=None, database=None),
    "dev": dict(max_examples=100, deadline=None),
    "nightly": dict(max_examples=2000, deadline=None),
}
PROPERTY = "gradient_conformance"  # the user_properties entry a check's record rides in
DEFAULT_OUTPUT = ".gradient-conformance"
MORE_LOOKS = 3  # a failing generated check's further looks for divergences of other signatures
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
    """A size option's value (8G, 512M) in bytes; else argparse's usage error."""
    from gradient_conformance.conformance.transports.confinement import parse_size
    try:
        return parse_size(text)
    except ValueError as problem:
        raise argparse.ArgumentTypeError(str(problem)) from None


def add_containment(add, prefix: str) -> None:
    """The implementation's containment options (docs/isolation.md, "Isolation"), declared
    once for the suite (`add` is pytest's addoption, `prefix` "--conformance-") and for every
    command that starts the implementation itself (argparse's add_argument, "--")."""
    add(f"{prefix}memory-limit", type=_size, default=None, metavar="SIZE",
        help="the most memory the implementation's process may take (8G, 512M; default: half "
        "the machine's, shared among the processes that run it at once: xdist's, fuzz's jobs)")
    add(f"{prefix}sandbox", default="auto", choices=["auto", "bwrap", "none"],
        help="run the implementation in a bubblewrap sandbox: auto (where bubblewrap works; "
        "the default), bwrap (or a usage error), none")
    add(f"{prefix}pass-env", action="append", default=[], metavar="NAME",
        help="an environment variable the implementation's process is given (it gets only a "
        "short allow-list otherwise); again for more")
    add(f"{prefix}sandbox-bind", action="append", default=[], metavar="PATH",
        help="a file or folder the sandboxed implementation may read besides its own module, "
        "package or named files (its data, the rest of its project); again for more")


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("the timeout must be more than 0 seconds")
    return value


def budget_seconds(text: str) -> float:
    """A failure-stage budget's value (the suite's --stage-budget, and grade's): finite
    seconds, 0 or more; else argparse's usage error."""
    value = _seconds(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("the budget is a number of seconds, 0 or more")
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


def add_options(parser) -> None:
    """The suite's options, on pytest's parser (or on anything with its getgroup)."""
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
    group.addoption("--conformance-stage-budget", type=budget_seconds, default=None,
                    metavar="SECONDS", help="the seconds of the run that reducing and "
                    "explaining divergences may take, in all (default 600; 0: every "
                    "divergence as found)")
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
    add_containment(group.addoption, "--conformance-")
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
    """A generated check (`@given(data=st.data())`, docs/suite.md, "The conformance suite") given
    anew from its inner test, under the settings `chosen`: the check's module function is
    left as it was, so the next session (or fuzz's batches) wraps it again. The database key
    and the derandomized seed come from the inner test, so they are the same as before."""
    from hypothesis import given
    from hypothesis import strategies as st
    return chosen(given(data=st.data())(test.hypothesis.inner_test))
