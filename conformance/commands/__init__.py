"""The `gradient-conformance` command (also `python -m gradient_conformance`). SPEC.md, "The
command line of the suite".

    gradient-conformance --impl=X [--profile P] [--report R.html] [PYTEST ARGS ...]
    gradient-conformance replay CASE --impl=X [--trace]
    gradient-conformance vectors --out DIR [--count N] [--profile P] [--seed S]
    gradient-conformance fuzz --impl=X --minutes N [--jobs K] [--report R.html] ...
    gradient-conformance matrix --impl A --impl B ... --report R.html
    gradient-conformance report FUZZ-OUT ... --out R.html
    gradient-conformance serve MODULE_OR_FILE
    gradient-conformance spec [SECTION]
    gradient-conformance mutants [--variant NAME ...] [--jobs K] [--list]

Without a command, it runs the installed suite under pytest, against --impl, from the current
directory; what it does not know (-x, -k, -n 2, ...) goes to pytest as it is. Exit status:
0 when everything agrees, 1 when something diverges, 2 for a usage error (the problem on
stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

COMMANDS = ("replay", "vectors", "fuzz", "matrix", "report", "serve", "spec", "mutants")
# The suite's options as this command spells them -> the plugin's (conformance/plugin.py),
# whose names carry a prefix so that they cannot clash with another pytest plugin's.
SUITE_OPTIONS = {
    "--profile": "--conformance-profile", "--max-examples": "--conformance-max-examples",
    "--case-timeout": "--conformance-case-timeout", "--report": "--conformance-report",
    "--load-timeout": "--conformance-load-timeout",
    "--report-json": "--conformance-report-json", "--cases-out": "--conformance-cases-out",
    "--xfails-file": "--conformance-xfails-file", "--skips-file": "--conformance-skips-file",
    "--no-shrink": "--conformance-no-shrink", "--in-process": "--conformance-in-process",
}
CHECKS_PACKAGE = "gradient_conformance.conformance.checks"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        return _command(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n", 1)[1])
        print("\nThe suite's options (each also as --conformance-NAME under plain pytest):\n  "
              + "\n  ".join(["--impl IMPL", *SUITE_OPTIONS]))
        return 0 if argv else 2
    return run_suite(argv)


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gradient-conformance", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser("replay", help="rerun one case file and print the comparison")
    replay.add_argument("case")
    replay.add_argument("--impl", required=True)
    replay.add_argument("--trace", action="store_true", help="print the reference's walk too")
    replay.add_argument("--diagnose", action="store_true", help="when it diverges, name the "
                        "variant of the spec that gives the same")
    replay.add_argument("--case-timeout", type=float, default=20.0)
    vectors = commands.add_parser("vectors", help="export generated cases with expected bits")
    vectors.add_argument("--out", required=True, help="the folder to write into")
    vectors.add_argument("--count", type=int, default=1000)
    vectors.add_argument("--profile", default="ci", choices=["ci", "dev", "nightly"],
                         help="ci: the same vectors every time; dev, nightly: fresh ones")
    vectors.add_argument("--seed", type=int, default=None, help="draw the set of this seed")
    fuzz = commands.add_parser("fuzz", help="run the generated checks continuously")
    fuzz.add_argument("--impl", required=True)
    fuzz.add_argument("--minutes", type=float, required=True)
    fuzz.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    fuzz.add_argument("--out", default="fuzz-out", help="where divergences, the database and "
                      "the report go (default fuzz-out/)")
    fuzz.add_argument("--report", default=None, help="the HTML report (default OUT/report.html)")
    fuzz.add_argument("--database", default="default", help="the Hypothesis example database: "
                      "a folder (default OUT/database), redis://HOST:PORT/DB, or none")
    fuzz.add_argument("--check", dest="checks", action="append", default=None,
                      help="fuzz only this check (repeatable); default all")
    fuzz.add_argument("--batch", type=int, default=50,
                      help="Hypothesis examples per check before the next check's turn")
    fuzz.add_argument("--rounds", type=int, default=None,
                      help="stop after this many batches of each check (default: --minutes)")
    fuzz.add_argument("--case-timeout", type=float, default=20.0)
    matrix = commands.add_parser("matrix", help="the ci profile against several "
                                 "implementations, as one table")
    matrix.add_argument("--impl", dest="impls", action="append", default=[])
    matrix.add_argument("--systems", action="store_true",
                        help="also every system this directory can run: the reference, the "
                        "fast implementation, each adapter whose package imports, MXNet "
                        "where .venv-mxnet is, TensorFlow.js where adapters/tfjs is set up")
    matrix.add_argument("--report", required=True, help="the HTML table; PATH.md beside it "
                        "is the markdown for README.md")
    matrix.add_argument("--profile", default="ci", choices=["ci", "dev", "nightly"])
    matrix.add_argument("--max-examples", type=int, default=None,
                        help="Hypothesis examples per check, instead of the profile's")
    collect = commands.add_parser("report", help="one report of the divergences that fuzz "
                                  "runs saved (several machines' OUT folders, say)")
    collect.add_argument("folders", nargs="+")
    collect.add_argument("--out", required=True, help="the HTML report (JSON beside it)")
    serve = commands.add_parser("serve", help="speak the JSON-lines protocol on stdin and "
                                "stdout for a Python implementation")
    serve.add_argument("impl", help="a module name, a .py file, or reference")
    spec = commands.add_parser("spec", help="print a section of the project's SPEC.md")
    spec.add_argument("section", nargs="?", default=None,
                      help="a heading, or part of one; without it, the list of sections")
    spec.add_argument("--vectors", action="store_true", help="VECTORS.md instead")
    mutants = commands.add_parser("mutants", help="run the suite against every variant of "
                                  "the spec in the catalogue: each must be killed")
    mutants.add_argument("--variant", dest="variants", action="append", default=None,
                         help="only this variant (repeatable); default all")
    mutants.add_argument("--profile", default="ci", choices=["ci", "dev", "nightly"])
    mutants.add_argument("--max-examples", type=int, default=None)
    mutants.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    mutants.add_argument("--list", dest="listing", action="store_true",
                         help="list the catalogue and stop")
    return parser


def _command(argv: list[str]) -> int:
    from gradient_conformance.reference.errors import IRError
    args = _parser().parse_args(argv)
    try:
        return {"replay": _replay, "vectors": _vectors, "fuzz": _fuzz, "matrix": _matrix,
                "report": _report, "serve": _serve, "spec": _spec,
                "mutants": _mutants}[args.command](args)
    except (OSError, ValueError, IRError) as problem:
        print(f"gradient-conformance {args.command}: {problem}", file=sys.stderr)
        return 2


def _load(spec: str, timeout: float):
    from gradient_conformance.conformance.implementation import LoadFailed, load
    try:
        return load(spec, timeout=timeout)
    except LoadFailed as problem:
        raise ValueError(f"--impl={spec}: could not load it: {problem}") from None


def _replay(args) -> int:
    from gradient_conformance.conformance.commands.replay import replay
    impl = _load(args.impl, args.case_timeout)
    try:
        agrees, text = replay(impl, args.case, trace=args.trace, diagnose=args.diagnose)
    finally:
        impl.close()
    print(text)
    return 0 if agrees else 1


def _vectors(args) -> int:
    from gradient_conformance.conformance.commands.vectors import export
    if args.count < 1:
        raise ValueError("--count must be at least 1")
    out = pathlib.Path(args.out)
    manifest = export(out, count=args.count, profile=args.profile, seed=args.seed)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    classes: dict[str, int] = {}
    for v in manifest["vectors"]:
        classes[v["class"]] = classes.get(v["class"], 0) + 1
    print(f"{manifest['count']} vectors in {out}/ ({size / 1e6:.2f} MB with index.json): "
          + ", ".join(f"{n} {k}" for k, n in sorted(classes.items())))
    return 0


def _fuzz(args) -> int:
    from gradient_conformance.conformance.commands.fuzz import fuzz
    if args.jobs < 1 or args.minutes <= 0:
        raise ValueError("--jobs must be at least 1 and --minutes more than 0")
    _load(args.impl, args.case_timeout).close()  # a usage error now, not in every worker
    out = pathlib.Path(args.out)
    report = pathlib.Path(args.report) if args.report else out / "report.html"
    progress = fuzz(args.impl, minutes=args.minutes, jobs=args.jobs, out=out, report=report,
                    database=args.database, checks=args.checks, batch=args.batch,
                    rounds=args.rounds, timeout=args.case_timeout)
    return 1 if progress.best else 0


def _report(args) -> int:
    from gradient_conformance.conformance.commands.fuzz import report_from_folders, write_report
    folders = [pathlib.Path(f) for f in args.folders]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise ValueError(f"no such folder: {missing[0]}")
    report = report_from_folders(folders)
    write_report(report, pathlib.Path(args.out))
    print(f"{len(report.divergences)} divergences shown ({report.notes[0]}); report written: "
          f"{args.out}")
    return 1 if report.divergences else 0


def _matrix(args) -> int:
    from gradient_conformance.conformance.commands.matrix import markdown, matrix, systems
    extra = (f"--max-examples={args.max_examples}",) if args.max_examples else ()
    impls = args.impls + ([s for s in systems(pathlib.Path.cwd()) if s not in args.impls]
                          if args.systems else [])
    if not impls:
        raise ValueError("name the implementations with --impl (repeatable), or --systems")
    reports = matrix(impls, report=pathlib.Path(args.report), profile=args.profile,
                     extra=extra)
    print(markdown(reports))
    return 0 if all(report is not None for report, _ in reports.values()) else 1


def _serve(args) -> int:
    from gradient_conformance.conformance.commands.serve import serve_module
    return serve_module(args.impl)


def _mutants(args) -> int:
    from gradient_conformance.conformance.commands.mutants import main as mutants
    extra = (f"--max-examples={args.max_examples}",) if args.max_examples else ()
    return mutants(args.variants, profile=args.profile, jobs=max(args.jobs, 1),
                   listing=args.listing, extra=extra)


def _spec(args) -> int:
    from gradient_conformance.conformance.commands.spec import show
    return show(args.section, document="VECTORS.md" if args.vectors else "SPEC.md")
