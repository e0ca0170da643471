"""The `gradient-conformance` command (also `python -m gradient_conformance`).
docs/commands.md, "The command line".

    gradient-conformance --impl=X [--profile P] [--report R.html] [PYTEST ARGS ...]
    gradient-conformance replay CASE --impl=X [--trace]
    gradient-conformance recheck REPORT.json --impl=X   # every claim of a run's report, again
    gradient-conformance vectors --out DIR [--count N] [--profile P] [--seed S]
    gradient-conformance fuzz --impl=X --minutes N [--jobs K] [--report R.html] ...
    gradient-conformance matrix --impl A --impl B ... --report R.html
    gradient-conformance grade SUBMISSIONS --out DIR [--rubric R.toml] [--jobs K]
    gradient-conformance report FUZZ-OUT ... --out R.html
    gradient-conformance serve MODULE_OR_FILE
    gradient-conformance spec [SECTION]
    gradient-conformance mutants [--variant NAME ...] [--jobs K] [--list]
    gradient-conformance coverage [--impl=X] [--profile P] [--fail-under PERCENT]
    gradient-conformance checks                 # the checks, a line each, to pick with -k

Without a command, it runs the installed suite under pytest, against --impl, from the current
directory; what it does not know (-x, -k, -n 2, ...) goes to pytest as it is. Exit status:
0 when everything agrees, 1 when something diverges, 2 for a usage error (the problem on
stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from gradient_conformance.conformance.commands.suite import options_help, run_suite

# command -> (its module, the module's function that adds its parser, the one that runs it).
# Each module is imported only when a command is asked for: the suite itself (no command)
# must start pytest before Hypothesis or the oracle is imported, or pytest warns that it
# cannot rewrite their asserts. `report` lives with `fuzz`, whose folders it reads.
COMMANDS = {"replay": ("replay", "add_parser", "run"),
            "recheck": ("recheck", "add_parser", "run"),
            "vectors": ("vectors", "add_parser", "run"),
            "fuzz": ("fuzz", "add_parser", "run"),
            "matrix": ("matrix", "add_parser", "run"),
            "grade": ("grade", "add_parser", "run"),
            "report": ("fuzz", "add_report_parser", "run_report"),
            "serve": ("serve", "add_parser", "run"),
            "spec": ("spec", "add_parser", "run"),
            "mutants": ("mutants", "add_parser", "run"),
            "coverage": ("coverage", "add_parser", "run"),
            "checks": ("checks", "add_parser", "run")}


def _function(command: str, which: int):
    module = importlib.import_module(f"{__name__}.{COMMANDS[command][0]}")
    return getattr(module, COMMANDS[command][which])


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C before pytest took over (start-up, loading the implementation) or in a
        # command: a line, not a traceback, and pytest's own status for an interrupted run.
        print("gradient-conformance: interrupted", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`gradient-conformance checks | head`): as a Unix tool does,
        # stop quietly, with the status a pipe's writer gets. stdout is pointed at /dev/null
        # so that Python's flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as problem:
        # pytest's own report of a Ctrl-C can fail (a frame without a line number, where the
        # signal landed, breaks its traceback's repr): the run was interrupted all the same.
        if not isinstance(problem.__context__, KeyboardInterrupt):
            raise
        print("gradient-conformance: interrupted (pytest could not report where: "
              f"{type(problem).__name__})", file=sys.stderr)
        return 2


def _own_process() -> None:
    """The suite's processes are the suite's (docs/isolation.md, "The suite's own process"):
    no Python this command starts (xdist's workers and fuzz's sessions are `python -c`, the
    matrix's runs `python -m`) puts the current folder, the implementation's often, first on
    its import path (PYTHONSAFEPATH); and Hypothesis keeps what it stores (its constants'
    cache, the dev and nightly profiles' examples) in a folder of this run's, not in a
    `.hypothesis` the current folder may hold, unless the user says where."""
    os.environ["PYTHONSAFEPATH"] = "1"
    if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
        import atexit
        import shutil
        import tempfile
        folder = tempfile.mkdtemp(prefix="gradient-conformance-hypothesis-")
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = folder
        atexit.register(shutil.rmtree, folder, True)


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _own_process()
    if argv and argv[0] in COMMANDS:
        return _command(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n", 1)[1])
        print("\nThe suite's options (each also as --conformance-NAME under plain pytest):\n"
              + options_help())
        return 0 if argv else 2
    return run_suite(argv)


def _parser(command: str) -> argparse.ArgumentParser:
    """The parser of `command` alone: building it imports that command's module only, so
    that `serve` runs where the suite's dependencies are not installed (MXNet's venv)."""
    parser = argparse.ArgumentParser(prog="gradient-conformance", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    _function(command, 1)(parser.add_subparsers(dest="command", required=True))
    return parser


def _command(argv: list[str]) -> int:
    from gradient_conformance.reference.errors import IRError
    args = _parser(argv[0]).parse_args(argv)
    try:
        return _function(args.command, 2)(args)
    except BrokenPipeError:
        # The reader stopped reading (`spec | head`): what it read is what it wanted. Python's
        # documented way: point stdout at devnull, so that the flush at exit raises nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, ValueError, IRError) as problem:
        print(f"gradient-conformance {args.command}: {problem}", file=sys.stderr)
        return 2
