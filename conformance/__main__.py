"""The suite's commands beside pytest. SPEC.md, "Reports", "Test vectors", "Fuzzing".

    python -m conformance replay CASE.ir --impl=X [--trace]
    python -m conformance vectors --out DIR [--count N] [--profile ci|dev|nightly] [--seed S]
    python -m conformance fuzz --impl=X --minutes N [--jobs K] [--report PATH.html] ...
    python -m conformance matrix --impl A --impl B ... --report PATH.html
    python -m conformance report FUZZ-OUT ... --out PATH.html

Exit status: 0 when everything agrees, 1 when something diverges, 2 for a usage error (with
the problem on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import sys

from reference.errors import IRError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser("replay", help="rerun one case file and print the comparison")
    replay.add_argument("case")
    replay.add_argument("--impl", required=True)
    replay.add_argument("--trace", action="store_true", help="print the reference's walk too")
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
    matrix.add_argument("--impl", dest="impls", action="append", required=True)
    matrix.add_argument("--report", required=True, help="the HTML table; PATH.md beside it "
                        "is the markdown for README.md")
    matrix.add_argument("--profile", default="ci", choices=["ci", "dev", "nightly"])
    collect = commands.add_parser("report", help="one report of the divergences that fuzz "
                                  "runs saved (several machines' OUT folders, say)")
    collect.add_argument("folders", nargs="+")
    collect.add_argument("--out", required=True, help="the HTML report (JSON beside it)")
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            return _replay(args)
        if args.command == "vectors":
            return _vectors(args)
        if args.command == "fuzz":
            return _fuzz(args)
        if args.command == "matrix":
            return _matrix(args)
        if args.command == "report":
            return _report(args)
    except (OSError, ValueError, IRError) as problem:
        print(f"python -m conformance {args.command}: {problem}", file=sys.stderr)
        return 2
    return 2


def _load(spec: str, timeout: float):
    from .implementation import load
    try:
        return load(spec, timeout=timeout)
    except Exception as problem:  # noqa: BLE001 - whatever the module raised while importing
        raise ValueError(f"--impl={spec}: could not load it: {type(problem).__name__}: "
                         f"{problem}") from None


def _replay(args) -> int:
    from .replay import replay
    impl = _load(args.impl, args.case_timeout)
    try:
        agrees, text = replay(impl, args.case, trace=args.trace)
    finally:
        impl.close()
    print(text)
    return 0 if agrees else 1


def _vectors(args) -> int:
    import pathlib

    from .vectors import export
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
    import pathlib

    from .fuzz import fuzz
    if args.jobs < 1 or args.minutes <= 0:
        raise ValueError("--jobs must be at least 1 and --minutes more than 0")
    out = pathlib.Path(args.out)
    report = pathlib.Path(args.report) if args.report else out / "report.html"
    progress = fuzz(args.impl, minutes=args.minutes, jobs=args.jobs, out=out, report=report,
                    database=args.database, checks=args.checks, batch=args.batch,
                    rounds=args.rounds, timeout=args.case_timeout)
    return 1 if progress.best else 0


def _report(args) -> int:
    import pathlib

    from .fuzz import report_from_folders, write_report
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
    import pathlib

    from .matrix import markdown, matrix
    reports = matrix(args.impls, report=pathlib.Path(args.report), profile=args.profile)
    print(markdown(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
