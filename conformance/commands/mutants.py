"""`gradient-conformance mutants`: the suite's measure of power. docs/diagnosis.md, "Diagnosis".

Every variant of the catalogue (conformance/diagnosis/variants.py), applied to the reference, is a
faulty implementation: the suite runs against each (`--impl=variant:NAME`, stopping at the
first failure) and must kill it. It prints, per variant, the check that killed it and how
long that took, then the count killed, the survivors, the median and largest time to the
first failure, and each strategy's draw rate beside Hypothesis's own for a trivial strategy,
measured in the same run (generators/rates.py). A variant listed in EQUIVALENT is one no
program can tell from the spec, with the reason; it is reported as such, not as a survivor.
"""

from __future__ import annotations

import re
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

from gradient_conformance.conformance.commands.suite import in_subprocess
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE, EQUIVALENT
from gradient_conformance.conformance.options import PROFILES


def run_one(name: str, profile: str, extra: tuple[str, ...] = ()) -> tuple[str, str, float, str]:
    """(outcome: killed, survived or error; the check that killed it, or what went wrong;
    seconds to the end of the run, which stops at the first failure; what the diagnosis of
    its divergences named, `naming`)."""
    import pathlib
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        done = in_subprocess([f"--impl=variant:{name}", f"--profile={profile}", "-x", "-q",
                              "-p", "no:cacheprovider", *extra],
                             report_json=pathlib.Path(folder) / "report.json")
    output, seconds = done.output, done.seconds
    if done.code == 1:
        failed = re.search(r"^FAILED \S*?(\w+\.py::\w+(\[[^\]]*\])?)", output, re.M)
        named = naming(name, done.report.divergences if done.report else None)
        return "killed", failed.group(1) if failed else "a check", seconds, named
    if done.code == 0:
        return "survived", "", seconds, ""
    return "error", " ".join(output.strip().splitlines()[-2:])[-200:], seconds, ""


def naming(name: str, divergences) -> str:
    """What the diagnosis of a variant's divergences named (docs/diagnosis.md,
    "Confirmation"): "itself" when one names it (alone, or in a pair); "wrong: OTHER" when
    none does and one names another; "unnamed" when none names anything; "no report"."""
    if divergences is None:
        return "no report"
    named: set[str] = set()
    for d in divergences:
        kept = d.diagnosis or {}
        for v in [*kept.get("variants", []), *(v for pair in kept.get("pairs", [])
                                                for v in pair)]:
            if isinstance(v, dict) and isinstance(v.get("name"), str):
                named.add(v["name"])
    if name in named:
        return "itself"
    return f"wrong: {', '.join(sorted(named))}" if named else "unnamed"


def mutants(names: list[str], *, profile: str = "ci", jobs: int = 1, extra: tuple[str, ...] = (),
            out=sys.stdout) -> dict[str, tuple[str, str, float, str]]:
    print(f"the {profile} profile against {len(names)} variants of the spec, each stopping at "
          "its first failure; named: what the diagnosis of its divergences named", file=out,
          flush=True)
    results: dict[str, tuple[str, str, float, str]] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, result in zip(names, pool.map(lambda n: run_one(n, profile, extra), names),
                                strict=True):
            results[name] = result
            outcome, detail, seconds, named = result
            if outcome == "survived" and name in EQUIVALENT:
                outcome, detail = "equivalent", EQUIVALENT[name]
            print(f"{name:<32} {outcome:<10} {seconds:6.1f} s  {detail}"
                  + (f"  named: {named}" if named else ""), file=out, flush=True)
    killed = [r[2] for r in results.values() if r[0] == "killed"]
    survivors = [n for n, r in results.items() if r[0] == "survived" and n not in EQUIVALENT]
    equivalent = [n for n, r in results.items() if r[0] == "survived" and n in EQUIVALENT]
    errors = [n for n, r in results.items() if r[0] == "error"]
    print(f"{len(killed)} of {len(names)} killed; survivors: {', '.join(survivors) or 'none'}"
          f"; equivalent: {', '.join(equivalent) or 'none'}"
          + (f"; errors: {', '.join(errors)}" if errors else ""), file=out)
    if killed:
        itself = sum(1 for r in results.values() if r[3] == "itself")
        wrong = sorted(n for n, r in results.items() if r[3].startswith("wrong"))
        unnamed = sorted(n for n, r in results.items() if r[3] == "unnamed")
        print(f"named at the first failure: {itself} of {len(killed)} killed named themselves; "
              f"left unnamed: {', '.join(unnamed) or 'none'}; named another: "
              f"{', '.join(wrong) or 'none'}", file=out)
        print(f"time to the first failure: median {statistics.median(killed):.1f} s, at most "
              f"{max(killed):.1f} s", file=out)
    if len(names) == len(CATALOGUE):  # the figures of a whole run (half a minute more)
        from gradient_conformance.generators.rates import draw_rates, rates_table
        print("draw rates in this process, beside Hypothesis's own for a trivial strategy "
              "and for as many bare choices:\n" + rates_table(draw_rates()), file=out)
    return results


def main(names: list[str] | None, *, profile: str, jobs: int, listing: bool,
         extra: tuple[str, ...] = ()) -> int:
    if listing:
        for v in CATALOGUE.values():
            print(f"{v.name:<32} {v.section:<26} {v.says}")
        return 0
    unknown = sorted(set(names or []) - set(CATALOGUE))
    if unknown:
        raise ValueError(f"no variant {unknown[0]!r} in the catalogue (--list lists them)")
    results = mutants(names or list(CATALOGUE), profile=profile, jobs=jobs, extra=extra)
    bad = [n for n, r in results.items() if r[0] == "error" or
           (r[0] == "survived" and n not in EQUIVALENT)]
    return 1 if bad else 0


def add_parser(commands) -> None:
    parser = commands.add_parser("mutants", help="run the suite against every variant of "
                                  "the spec in the catalogue: each must be killed")
    parser.add_argument("--variant", dest="variants", action="append", default=None,
                         help="only this variant (repeatable); default all")
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--max-examples", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    parser.add_argument("--list", dest="listing", action="store_true",
                        help="list the catalogue and stop")
    parser.add_argument("-k", dest="select", default=None, metavar="EXPRESSION",
                        help="only the checks pytest's -k EXPRESSION selects")
    parser.add_argument("paths", nargs="*", metavar="CHECK_FILE",
                        help="check files of your own to run beside the installed ones")


def run(args) -> int:
    extra = ((f"--max-examples={args.max_examples}",) if args.max_examples else ()) + \
        (("-k", args.select) if args.select else ()) + tuple(args.paths)
    return main(args.variants, profile=args.profile, jobs=max(args.jobs, 1),
                listing=args.listing, extra=extra)

