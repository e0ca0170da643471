"""The suite's commands beside pytest. SPEC.md, "Reports", "Test vectors", "Fuzzing".

    python -m conformance replay CASE.ir --impl=X [--trace]
    python -m conformance vectors --out DIR [--count N] [--profile ci|dev|nightly] [--seed S]
    python -m conformance fuzz --impl=X --minutes N [--jobs K] [--report PATH.html] ...

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
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            return _replay(args)
        if args.command == "vectors":
            return _vectors(args)
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


if __name__ == "__main__":
    sys.exit(main())
