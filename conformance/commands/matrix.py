"""`python -m conformance matrix --impl A --impl B ... --report PATH.html`: the ci profile
against several implementations, and one table of system by check. docs/reports.md, "The
conformance table".

Each implementation runs in its own pytest process, which writes its JSON report, so one
system's crash or import error is its own row's problem. The table is made from those
reports: per check, passed / failed / skipped, and the first divergence of each failed check.
The markdown document (`--markdown docs/systems.md` writes that file whole, as `make
systems` does) says the command, the date and the run's length, and names no path of this
machine (the checkout, the virtual environment, the home folder: replaced by names). Each
cell of the HTML page links to its system's own report, and the page says what changed since
the previous matrix written to the same path: the divergences new to each system and those
fixed, by signature (like test262.fyi's history).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import shlex
import sys
import time

from gradient_conformance import without_paths
from gradient_conformance.adapters.systems import systems
from gradient_conformance.conformance.commands.suite import in_subprocess
from gradient_conformance.conformance.divergence import write_atomically
from gradient_conformance.conformance.options import PROFILES
from gradient_conformance.reports.matrix import html, markdown, stem_of, summary
from gradient_conformance.reports.records import Report


def run_one(spec: str, out: pathlib.Path, *, profile: str = "ci",
            extra: tuple[str, ...] = ()) -> tuple[Report | None, str]:
    """The suite against one implementation, in a subprocess: its report, or None and what
    went wrong."""
    stem = stem_of(spec)
    done = in_subprocess([f"--impl={spec}", f"--profile={profile}", "-q", "-p",
                          "no:cacheprovider", f"--report={out / (stem + '.html')}", *extra],
                         report_json=out / f"{stem}.json")
    if done.code not in (0, 1) or done.report is None:  # 0 agrees, 1 diverges
        tail = done.output.strip().splitlines()[-5:]
        return None, f"exit status {done.code}: " + " ".join(tail)[-300:]
    return done.report, ""


def matrix(specs: list[str], *, report: pathlib.Path, profile: str = "ci",
           extra: tuple[str, ...] = (), log=sys.stderr,
           written: pathlib.Path | None = None, command: str = "") -> dict:
    """Each of `specs` under `profile`, then the HTML table at `report` and the markdown
    document at `written` (PATH.md beside the report, by default): docs/systems.md, whole,
    when `written` is that file. `command`: how the matrix was asked for, as the document
    says it."""
    started = time.monotonic()
    out = report.with_suffix(".runs")
    out.mkdir(parents=True, exist_ok=True)
    reports = {}
    for spec in specs:
        print(f"matrix: {spec} ...", file=log, flush=True)
        reports[spec] = run_one(spec, out, profile=profile, extra=extra)
    kept = report.with_suffix(".json")
    try:
        previous = json.loads(kept.read_text())
    except (OSError, ValueError):
        previous = None
    if previous is not None and "systems" not in previous:
        previous = {"date": "", "systems": {}}  # a matrix of before the changes were kept
    current = summary(reports, datetime.datetime.now().isoformat(timespec="minutes"))
    write_atomically(report, html(reports, runs=out.name, previous=previous, current=current))
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    minutes = (time.monotonic() - started) / 60
    write_atomically(written or report.with_suffix(".md"), without_paths(
        f"# How real systems conform\n\nA generated record, not a specification: written by "
        f"`{command or 'gradient-conformance matrix'}` on {stamp} in {minutes:.0f} minutes, "
        f"the {profile} profile, Python {platform.python_version()} on "
        f"{platform.machine()}. Its figures are of that day's code and systems; run the "
        "command again for today's. What the columns mean: docs/reports.md, \"The "
        "conformance table\"; how each system is adapted: docs/adapters.md, \"Adapters\".\n\n"
        + markdown(reports), os.getcwd()))
    write_atomically(kept, json.dumps(current, indent=1, default=str))
    return reports


def add_parser(commands) -> None:
    parser = commands.add_parser("matrix", help="the ci profile against several "
                                 "implementations, as one table")
    parser.add_argument("--impl", dest="impls", action="append", default=[])
    parser.add_argument("--systems", action="store_true",
                        help="also every system this directory can run: the reference, the "
                        "fast implementation, each adapter whose package imports, MXNet "
                        "where .venv-mxnet is, TensorFlow.js where adapters/tfjs is set up")
    parser.add_argument("--report", required=True, help="the HTML table, with PATH.md beside "
                        "it (the markdown document) unless --markdown says where")
    parser.add_argument("--markdown", default=None, metavar="PATH",
                        help="where to write the markdown document (docs/systems.md is one)")
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--max-examples", type=int, default=None,
                        help="Hypothesis examples per check, instead of the profile's")
    parser.add_argument("-k", dest="select", default=None, metavar="EXPRESSION",
                        help="only the checks pytest's -k EXPRESSION selects")


def _shown(arg: str) -> str:
    """An argument as the document says it: an absolute path outside this folder (a
    temporary report, say) by its name alone, so that the document names no path of this
    machine (the folder, the venv and the home are named by without_paths)."""
    path = pathlib.Path(arg)
    if not path.is_absolute() or path.is_relative_to(pathlib.Path.cwd()):
        return arg
    return f".../{path.name}"


def run(args) -> int:
    extra = ((f"--max-examples={args.max_examples}",) if args.max_examples else ()) + \
        (("-k", args.select) if args.select else ())
    impls = args.impls + ([s for s in systems(pathlib.Path.cwd()) if s not in args.impls]
                          if args.systems else [])
    if not impls:
        raise ValueError("name the implementations with --impl (repeatable), or --systems")
    typed = sys.argv[sys.argv.index("matrix") + 1:] if "matrix" in sys.argv else []
    command = " ".join(["gradient-conformance matrix", *(shlex.quote(_shown(a)) for a in typed)])
    reports = matrix(impls, report=pathlib.Path(args.report), profile=args.profile,
                     extra=extra, command=command,
                     written=pathlib.Path(args.markdown) if args.markdown else None)
    print(markdown(reports))
    return 0 if all(report is not None for report, _ in reports.values()) else 1

