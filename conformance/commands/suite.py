"""Running the installed suite under pytest: the `gradient-conformance --impl=X ...` command,
and what the other commands share (loading an implementation as --impl names it)."""

from __future__ import annotations

import argparse
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
    "--pass-env": "--conformance-pass-env", "--known": "--conformance-known",
    "--sandbox-bind": "--conformance-sandbox-bind",
    "--write-known": "--conformance-write-known",
    "--stage-budget": "--conformance-stage-budget",
}
CHECKS_PACKAGE = "gradient_conformance.conformance.checks"


def suite_arguments(argv: list[str]) -> list[str]:
    """The pytest arguments that run the installed suite with these options."""
    # --assert=plain: the checks say what differs through their divergences, not through
    # pytest's rewritten asserts, whose compiling slows a fresh install's first start-up.
    # The suite's process is the suite's (docs/isolation.md, "The suite's own process"): no
    # configuration file (`-c /dev/null`: none is looked for), no conftest.py, from the
    # current folder (the implementation's, often) or anywhere; the current folder is still
    # where pytest's paths are shown from.
    out = ["-c", os.devnull, f"--rootdir={os.getcwd()}", "--noconftest",
           "--pyargs", CHECKS_PACKAGE, "-o", "python_files=test_*.py", "-o",
           "python_functions=test_*", "--assert=plain"]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        out += ["-p", "gradient_conformance.conformance.plugin"]
    for arg in argv:
        name, equals, value = arg.partition("=")
        out.append(SUITE_OPTIONS[name] + equals + value if name in SUITE_OPTIONS else arg)
    return out


@dataclass
class Option:
    """One of the suite's options, as the plugin declares it (conformance/plugin.py), under
    the name this command spells it."""

    name: str
    help: str
    metavar: str | None = None
    choices: list | None = None
    convert: object = None  # the plugin's type, which checks a value
    flag: bool = False  # takes no value

    def usage(self) -> str:
        if self.flag:
            return self.name
        return f"{self.name} {'{' + ','.join(self.choices) + '}' if self.choices else self.metavar}"


class _Declared:
    """A stand-in for pytest's parser that keeps what the plugin declares."""

    def __init__(self):
        self.options: list[Option] = []

    def getgroup(self, *args):
        return self

    def addoption(self, name, **kw):
        shown = {v: k for k, v in SUITE_OPTIONS.items()}.get(name, name)
        self.options.append(Option(shown, kw.get("help", ""), kw.get("metavar") or "VALUE",
                                   kw.get("choices"), kw.get("type"),
                                   kw.get("action") == "store_true"))


def suite_options() -> list[Option]:
    """The suite's options, with what each does and takes, from the plugin's declarations."""
    from gradient_conformance.conformance import options
    declared = _Declared()
    options.add_options(declared)
    return declared.options


def options_help() -> str:
    """The suite's options for --help: each with what it takes and what it does."""
    import textwrap
    lines = []
    for option in suite_options():
        lines.append(f"  {option.usage()}")
        lines += textwrap.wrap(option.help, 88, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


XDIST_OPTIONS = ("-n", "--numprocesses", "--dist", "--maxprocesses")


def usage_problem(argv: list[str]) -> str | None:
    """What is wrong with the suite's own options in `argv`, named as typed, with the fix; or
    None. pytest would say it later, naming the plugin's prefixed names, with its own exit
    status."""
    import importlib.util
    options = {o.name: o for o in suite_options()}
    options.update({SUITE_OPTIONS.get(o.name, o.name): o for o in options.values()})
    for k, arg in enumerate(argv):
        name, equals, value = arg.partition("=")
        if name in XDIST_OPTIONS or _glued_count(arg):
            if importlib.util.find_spec("xdist") is None:
                return (f"{arg}{'' if equals or arg[2:] else ' ' + ' '.join(argv[k + 1:k + 2])}"
                        ": running on several processes needs pytest-xdist, which is not "
                        "installed: pip install 'gradient-conformance[xdist]'")
            continue
        option = options.get(name)
        if option is None and name.startswith("--") and name != "--impl":
            guess = _meant(name, [*SUITE_OPTIONS, "--impl"])
            if guess is not None:
                return (f"{name}: no such option; did you mean {guess}? (gradient-conformance "
                        "--help lists the suite's options)")
        if option is None or option.flag:
            continue
        if not equals:
            if k + 1 >= len(argv) or argv[k + 1].startswith("--"):
                return f"{arg} needs a value: {option.usage()}; {option.help}"
            value = argv[k + 1]
        if option.choices and value not in option.choices:
            return (f"{arg if equals else arg + ' ' + value}: {value!r} is not one of "
                    f"{', '.join(option.choices)}; {option.help}")
        if callable(option.convert):
            try:
                option.convert(value)
            except (ValueError, TypeError, argparse.ArgumentTypeError) as problem:
                return f"{arg if equals else arg + ' ' + value}: {problem}"
    return None


def _meant(name: str, ours: list[str]) -> str | None:
    """The option of ours `name` looks like a typing slip of (`--imp`, `--profle`), unless
    pytest or one of its plugins has an option of that name."""
    import difflib
    close = difflib.get_close_matches(name, ours, n=1, cutoff=0.75)
    if not close:
        return None
    import re
    known = _pytest_options()
    if known is None or re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", known):
        return None
    return close[0]


def _pytest_options() -> str | None:
    """What `pytest --help` says, where pytest and its installed plugins list their options
    (pytest has no public call that lists them); None if it cannot be had, so that pytest
    judges the name itself, as before."""
    import subprocess
    import sys
    try:
        # Nothing of the current folder's (a conftest.py, a pytest.py): from this package's
        # folder, with no configuration, no conftest and no unsafe path.
        done = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p",
                               "no:cacheprovider", "-c", os.devnull, "--noconftest"],
                              capture_output=True, text=True, timeout=120,
                              cwd=os.path.dirname(os.path.abspath(__file__)),
                              env={**os.environ, "PYTHONSAFEPATH": "1"})
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _glued_count(arg: str) -> str:
    """The count of `-nN` (`-n2`, `-nauto`), or "" for any other argument."""
    return arg[2:] if arg.startswith("-n") and arg[2:].isalnum() else ""


def _workers_asked(argv: list[str]) -> tuple[int, int, str] | None:
    """Where `argv` asks for xdist's workers: (the index of the option's first word, how
    many words it takes, the count as typed), or None."""
    for k, arg in enumerate(argv):
        name, equals, value = arg.partition("=")
        if name in ("-n", "--numprocesses"):
            if equals:
                return k, 1, value
            return (k, 2, argv[k + 1]) if k + 1 < len(argv) else None
        if _glued_count(arg):
            return k, 1, _glued_count(arg)
    return None


def parallelism(argv: list[str], cores: int) -> tuple[list[str], str | None]:
    """docs/suite.md, "The conformance suite": `-n auto` chooses a count for this machine,
    and `-n N` that cannot help says so. Each xdist worker runs the checks and, apart from
    --in-process, the implementation's own process: two busy processes per worker."""
    asked = _workers_asked(argv)
    if asked is None:
        return argv, None
    from gradient_conformance.reports.records import counted
    k, words, count = asked
    per = 1 if "--in-process" in argv else 2
    fits = cores // per
    shown = " ".join(argv[k:k + words])
    busy = ("runs the checks and the implementation's own process" if per == 2
            else "runs the checks with the implementation in it")
    if count in ("auto", "logical"):
        if fits < 2:
            return (argv[:k] + argv[k + words:],
                    f"{shown}: this machine has {counted(cores, 'core')} and each "
                    f"worker {busy}, so one process runs the checks (no workers)")
        return ([*argv[:k], "-n", str(fits), *argv[k + words:]],
                f"{shown}: {fits} workers for this machine's {cores} cores (each worker "
                f"{busy})")
    if count.isdigit() and int(count) > max(fits, 1):
        return argv, (f"{shown}: each worker {busy}, so {int(count) * per} busy processes "
                      f"share this machine's {counted(cores, 'core')}; "
                      + (f"-n {fits} fits them" if fits >= 2 else
                         "one process without -n fits them"))
    return argv, None


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_suite(argv: list[str]) -> int:
    import json
    import sys

    problem = usage_problem(argv)
    if problem is not None:
        print(f"gradient-conformance: {problem}", file=sys.stderr)
        return 2
    # The report shows the command as the user typed it, not as pytest was called.
    os.environ["GRADIENT_CONFORMANCE_COMMAND"] = json.dumps(["gradient-conformance", *argv])
    argv, note = parallelism(argv, usable_cores())
    if note is not None:
        print(f"gradient-conformance: {note}", file=sys.stderr)
    import pytest
    code = int(pytest.main(suite_arguments(argv)))
    # pytest's usage error is 4; this command's, as --help says, is 2.
    return 2 if code == pytest.ExitCode.USAGE_ERROR else code


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
    # -P: the current folder is not put on the import path, where a `gradient_conformance/`
    # of the implementation's folder would be run in place of this package.
    run = subprocess.run([sys.executable, "-P", "-m", "gradient_conformance", *argv, *extra],
                         capture_output=True, text=True, env=env, timeout=timeout)
    done = Finished(run.returncode, run.stdout + run.stderr, time.perf_counter() - started)
    if report_json is not None and report_json.exists():
        try:
            done.report = from_json(report_json.read_text())
        except (ValueError, KeyError, TypeError):
            done.report = None
    return done


def confinement_of(args, sharing: int = 1):
    """The containment a command's options ask for (options.add_containment's, docs/
    isolation.md, "Isolation"), for a command that starts the implementation itself; the
    default memory limit shared among `sharing` processes."""
    from gradient_conformance.conformance.transports.confinement import Confinement
    return Confinement.asked(args.memory_limit, args.sandbox, args.pass_env, sharing,
                             args.sandbox_bind)


def contained(args, sandbox: str) -> tuple[str, ...]:
    """The suite's containment options, as a command that starts sessions of the suite (fuzz,
    grade) was given them (docs/isolation.md, "Isolation"), for each session it starts, with
    the `sandbox` decided (never `auto`); a bad size was a usage error already."""
    from gradient_conformance.conformance.transports.confinement import default_memory_limit
    out = [f"--sandbox={sandbox}", *(f"--pass-env={n}" for n in args.pass_env),
           *(f"--sandbox-bind={path}" for path in args.sandbox_bind)]
    if args.memory_limit is not None:  # parsed already (options.add_containment)
        out.append(f"--memory-limit={args.memory_limit}")
    elif args.scheduler is None:  # the jobs share this machine; a cluster's worker, its own
        out.append(f"--memory-limit={default_memory_limit(args.jobs or 1)}")
    return tuple(out)


def load_implementation(spec: str, timeout: float, confinement=None):
    """The implementation --impl names, contained as `confinement` says (from
    `confinement_of`; by default the suite's default), or ValueError (a usage error) saying
    why not."""
    from gradient_conformance.conformance.transports.loading import LoadFailed, load
    try:
        return load(spec, timeout=timeout, confinement=confinement)
    except LoadFailed as problem:
        from gradient_conformance.reports.records import quoted
        raise ValueError(f"--impl={spec}: could not load it: {quoted(str(problem))}") from None

