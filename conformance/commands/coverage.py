"""`gradient-conformance coverage`: which of the spec's conditions a run of the suite took.
docs/generators.md, "Conditions".

It runs the suite (against --impl, the reference by default: it claims every feature, so no
check is skipped) under a profile, in a process of its own, and reads the conditions back
from its JSON report, as data: for each check, how many conditions of the model
(reference/conditions.py) its cases took; by kind, how many of the model's were taken; and
every condition no case took, with what it is. `--fail-under PERCENT` makes a run that takes
less of the model exit 1.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

from gradient_conformance.conformance.commands.suite import in_subprocess
from gradient_conformance.conformance.options import PROFILES


def taken(report) -> dict[str, dict[str, int]]:
    """check -> condition -> cases, from a report read back: only the model's names, with
    whole counts."""
    from gradient_conformance.conformance.totals import condition_counts
    per_check = report.conditions if isinstance(report.conditions, dict) else {}
    return {str(check): condition_counts(counts) for check, counts in per_check.items()}


def generated_checks(report, per_check) -> set[str]:
    """The checks of the report that Hypothesis drove: names it lists, among its checks."""
    listed = report.coverage.get("generated") if isinstance(report.coverage, dict) else None
    return {c for c in listed if isinstance(c, str) and c in per_check} \
        if isinstance(listed, list) else set()


def summary(per_check: dict[str, dict[str, int]], *, profile: str, impl: str,
            seconds: float, generated=frozenset()) -> tuple[float, list[str]]:
    """The share of the model taken, and the lines that say so; of it, the share the
    `generated` checks took alone (the case files and the fixed programs left out)."""
    from gradient_conformance.reference.conditions import CONDITIONS, PAIRS, PRODUCTS, kinds
    everything = {name for counts in per_check.values() for name in counts}
    reached = everything & set(CONDITIONS)
    share = 100 * len(reached) / len(CONDITIONS)
    lines = [f"the {profile} profile against {impl} took {len(reached)} of the "
             f"{len(CONDITIONS)} conditions of the model ({share:.1f}%) in {seconds:.0f} s"]
    alone = {name for check in generated for name in per_check.get(check, {})}
    if generated:
        lines.append(f"generated checks alone ({len(generated)} of {len(per_check)}) took "
                     f"{len(alone & reached)} ({100 * len(alone & reached) / len(CONDITIONS):.1f}"
                     f"%); besides them: "
                     f"{', '.join(n for n in CONDITIONS if n in reached - alone) or 'none'}")
    for label, model in (("products", PRODUCTS), ("pairs", PAIRS)):
        taken = everything & set(model)
        lines.append(f"{label}: {len(taken)} of {len(model)} "
                     f"({100 * len(taken) / len(model):.1f}%)" + (
                         f"; generated checks alone {len(alone & taken)} "
                         f"({100 * len(alone & taken) / len(model):.1f}%)" if generated else ""))
    lines += ["", "taken per check: conditions, products, pairs"]
    width = max((len(c) for c in per_check), default=0)
    for check in sorted(per_check):
        names = set(per_check[check])
        lines.append(f"  {check:<{width}}  {len(names & set(CONDITIONS)):>4} "
                     f"{len(names & set(PRODUCTS)):>5} {len(names & set(PAIRS)):>5}")
    lines += ["", "per kind, taken of the model's:"]
    for kind, of_kind in kinds().items():
        lines.append(f"  {kind:<11} {sum(n in reached for n in of_kind):>4} of {len(of_kind)}")
    never = [n for n in CONDITIONS if n not in reached]
    lines += ["", f"never taken ({len(never)}):" if never else "every condition was taken"]
    lines += [f"  {n:<34} {CONDITIONS[n].says}" for n in never]
    if generated:
        lines += ["", "products no generated check took, per rule (position.kind: classes; "
                  "g: classes):"]
        lines += [f"  {line}" for line in _untaken(set(PRODUCTS) - alone)]
    return share, lines


def _untaken(names: set[str]) -> list[str]:
    """The products in `names`, a line per rule: each position and kind with its classes."""
    from gradient_conformance.reference.conditions import PRODUCTS
    rows: dict[str, dict[str, list[str]]] = {}
    for name in PRODUCTS:  # in the model's order
        if name in names:
            head, cls = name.removeprefix("product.").rsplit(".", 1)
            if head.endswith(".g"):  # product.ROW.g.CLASS (a row may hold a dot)
                row, where = head.removesuffix(".g"), "g"
            else:  # product.ROW.POSITION.KIND.CLASS
                row, position, kind = head.rsplit(".", 2)
                where = f"{position}.{kind}"
            rows.setdefault(row, {}).setdefault(where, []).append(cls)
    return [f"{row}: " + "; ".join(f"{where}: {', '.join(classes)}"
                                   for where, classes in groups.items())
            for row, groups in rows.items()]


def main(*, profile: str, impl: str, extra: tuple[str, ...] = (), fail_under: float | None,
         out=sys.stdout) -> int:
    with tempfile.TemporaryDirectory(prefix="gradient-coverage-") as folder:
        path = pathlib.Path(folder) / "report.json"
        done = in_subprocess([f"--impl={impl}", f"--profile={profile}", "-q",
                              "-p", "no:cacheprovider", *extra], report_json=path)
    if done.report is None or done.code not in (0, 1):
        tail = " ".join(done.output.strip().splitlines()[-3:])[-400:]
        raise ValueError(f"the suite did not run to its report (exit {done.code}): {tail}")
    per_check = taken(done.report)
    share, lines = summary(per_check, profile=profile, impl=impl, seconds=done.seconds,
                           generated=generated_checks(done.report, per_check))
    if done.code == 1:
        lines.append("\nnote: the implementation diverged in this run; a check stops drawing "
                     "at its first divergence, so the conditions are those of the cases run")
    print("\n".join(lines), file=out)
    return 1 if fail_under is not None and share < fail_under else 0


def add_parser(commands) -> None:
    parser = commands.add_parser("coverage", help="run the suite and say which of the spec's "
                                 "conditions its cases took, and which none did")
    parser.add_argument("--impl", default="reference",
                        help="the implementation to run against (default: the reference)")
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--max-examples", type=int, default=None)
    parser.add_argument("--fail-under", type=float, default=None, metavar="PERCENT",
                        help="exit 1 when less of the model than this was taken")
    parser.add_argument("-n", dest="workers", default=None, metavar="N",
                        help="run the checks in N processes (pytest-xdist)")


def run(args) -> int:
    if args.max_examples is not None and args.max_examples < 1:
        raise ValueError(f"--max-examples={args.max_examples}: give 1 or more")
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:
        raise ValueError(f"--fail-under={args.fail_under}: a percentage, 0 to 100")
    extra = ((f"--max-examples={args.max_examples}",) if args.max_examples else ()) + \
        (("-n", args.workers) if args.workers else ())
    return main(profile=args.profile, impl=args.impl, extra=extra, fail_under=args.fail_under)
