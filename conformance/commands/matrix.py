"""`python -m conformance matrix --impl A --impl B ... --report PATH.html`: the ci profile
against several implementations, and one table of system by check. SPEC.md, "The
conformance table".

Each implementation runs in its own pytest process, which writes its JSON report, so one
system's crash or import error is its own row's problem. The table is made from those
reports: per check, passed / failed / skipped, and the first divergence of each failed check.
The markdown form is what README.md carries.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from html import escape

from gradient_conformance.conformance.divergence import write_atomically
from gradient_conformance.reports.records import Report, from_json

# The in-process adapters, by the package each needs.
ADAPTERS = {"torch": "torch_impl", "jax": "jax_impl", "tinygrad": "tinygrad_impl",
            "tensorflow": "tensorflow_impl", "micrograd": "micrograd_impl"}
MXNET = "cmd:.venv-mxnet/bin/python -m gradient_conformance serve adapters.mxnet_impl"
TFJS = "cmd:node adapters/tfjs/server.mjs"


def systems(base: pathlib.Path) -> list[str]:
    """Every system that can run from `base` (a checkout, set up by make): the reference,
    the fast implementation, the adapters whose packages are installed, and the two served
    systems where their environments are."""
    import importlib.util
    found = ["reference", "implementations.fast"]
    found += [f"adapters.{module}" for package, module in ADAPTERS.items()
              if importlib.util.find_spec(package) is not None]
    if (base / ".venv-mxnet" / ".ready").exists():
        found.append(MXNET)
    if (base / "adapters" / "tfjs" / "node_modules" / "@tensorflow" / "tfjs-core").is_dir():
        found.append(TFJS)
    return found


def run_one(spec: str, out: pathlib.Path, *, profile: str = "ci",
            extra: tuple[str, ...] = ()) -> tuple[Report | None, str]:
    """The suite against one implementation, in a subprocess: its report, or None and what
    went wrong."""
    stem = "".join(c if c.isalnum() else "_" for c in spec)[:60]
    json_path = out / f"{stem}.json"
    json_path.unlink(missing_ok=True)  # a report left by an earlier run is not this one's
    env = dict(os.environ)
    env.setdefault("DEV", "PYTHON")  # tinygrad's device; no other system reads it
    # From where the user is, so that their modules and relative paths mean what they say.
    run = subprocess.run(
        [sys.executable, "-m", "gradient_conformance", f"--impl={spec}",
         f"--profile={profile}", "-q", "-p", "no:cacheprovider",
         f"--report={out / (stem + '.html')}", f"--report-json={json_path}", *extra],
        env=env, capture_output=True, text=True)
    if run.returncode not in (0, 1) or not json_path.exists():  # 0 agrees, 1 diverges
        tail = (run.stderr or run.stdout).strip().splitlines()[-5:]
        return None, f"exit status {run.returncode}: " + " ".join(tail)[-300:]
    return from_json(json_path.read_text()), ""


def cell(report: Report, check: str) -> tuple[str, str]:
    """(the outcome counts of one check, the first divergence's summary or '')."""
    counts = report.checks.get(check, {})
    passed, failed, skipped = (counts.get(k, 0) for k in ("passed", "failed", "skipped"))
    text = "fail" if failed else "pass" if passed else "skipped" if skipped else "-"
    if failed or skipped:
        text += f" ({passed}/{failed}/{skipped})" if passed + failed + skipped > 1 else ""
    first = next((d for d in report.divergences if d.check == check), None)
    return text, (first.summary if first else "")


def table(reports: dict[str, tuple[Report | None, str]]) -> tuple[list[str], list[list]]:
    checks = sorted({c for r, _ in reports.values() if r for c in r.checks})
    rows = []
    for spec, (report, problem) in reports.items():
        if report is None:
            rows.append([spec, f"{spec}: did not run ({problem})"] + [("-", "")] * len(checks))
            continue
        label = f"{report.implementation.get('name')} {report.implementation.get('version')}"
        rows.append([spec, label] + [cell(report, c) for c in checks])
    return checks, rows


def markdown(reports) -> str:
    checks, rows = table(reports)
    head = ["system", *[c.removeprefix("test_") for c in checks]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row[1].replace("|", "\\|")] + [c[0] for c in row[2:]]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Cells: pass, fail or skipped; (passed/failed/skipped) for parametrized "
                 "checks. First divergence of each failed check:")
    lines.append("")
    for row in rows:
        for check, (_, first) in zip(checks, row[2:], strict=True):
            if first:
                lines.append(f"- **{row[1]}**, `{check.removeprefix('test_')}`: "
                             f"{_one_line(first)}")
    lines += ["", "What each system does instead, as diagnosed (SPEC.md, \"Diagnosis\"): the "
              "variants of the spec that reproduce its divergences bit for bit (several, "
              "when more than one does), with how many divergences each explains.", ""]
    named: dict[str, dict] = {}
    for report, _ in reports.values():
        if report is not None and report.divergences:
            lines.append(f"- **{report.implementation.get('name')}**: " +
                         "; ".join(findings(report)) + ".")
            named.update(variants_named(report))
    if named:
        lines += ["", "The variants named:", ""]
        lines += [f"- `{name}`: {v['says']} (SPEC.md, \"{v['section']}\")"
                  for name, v in sorted(named.items())]
    return "\n".join(lines) + "\n"


def variants_named(report: Report) -> dict[str, dict]:
    """Each variant some diagnosis of the report names, with what it says."""
    found = {}
    for d in report.divergences:
        for v in d.diagnosis.get("variants", []) + [v for pair in d.diagnosis.get("pairs", [])
                                                    for v in pair]:
            found[v["name"]] = v
    return found


def findings(report: Report) -> list[str]:
    """A system's diagnoses, one phrase per set of variants that explain a divergence (or
    pair) with its count; then the divergences no variant explains, by where they were
    located (the kind of departure and the op of its statement); then those neither
    explained nor located, by the reason they could not be."""
    counts: dict[str, int] = {}
    located: dict[str, int] = {}
    neither: dict[str, int] = {}
    for d in report.divergences:
        named = [f"`{v['name']}`" for v in d.diagnosis.get("variants", [])]
        named += [" with ".join(f"`{v['name']}`" for v in pair)
                  for pair in d.diagnosis.get("pairs", [])]
        if named:
            key = " or ".join(named)
            counts[key] = counts.get(key, 0) + 1
        elif d.location.get("line"):
            where = f"{d.location.get('kind', '')} at `{d.location.get('op', '')}`"
            located[where] = located.get(where, 0) + 1
        else:
            why = d.location.get("reason") or d.diagnosis.get("reason") or "not probed"
            neither[why] = neither.get(why, 0) + 1
    phrases = [f"{text}: {n}" for text, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    if located:
        phrases.append(f"no known variant, located ({sum(located.values())}): " + ", ".join(
            f"{text} {n}" for text, n in sorted(located.items(), key=lambda kv: (-kv[1], kv[0]))))
    if neither:
        phrases.append(f"neither ({sum(neither.values())}): " + "; ".join(
            f"{why} {n}" for why, n in sorted(neither.items(), key=lambda kv: (-kv[1], kv[0]))))
    return phrases


def html(reports) -> str:
    checks, rows = table(reports)
    out = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
           "<title>Gradient conformance matrix</title><style>",
           "body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}",
           "td,th{border:1px solid #ccc;padding:.3em .5em;vertical-align:top}",
           ".fail{background:#fde2e2}.pass{background:#e6f4e6}.skipped{background:#f2f2f2}",
           "small{color:#555;display:block;max-width:28em}</style></head><body>",
           "<h1>Gradient conformance matrix</h1><table><tr><th>system</th>"]
    out += [f"<th>{escape(c.removeprefix('test_'))}</th>" for c in checks]
    out.append("</tr>")
    for row in rows:
        out.append(f"<tr><td>{escape(row[1])}<br><code>{escape(row[0])}</code></td>")
        for text, first in row[2:]:
            klass = text.split()[0] if text != "-" else ""
            detail = f"<small>{escape(_one_line(first))}</small>" if first else ""
            out.append(f"<td class='{escape(klass)}'>{escape(text)}{detail}</td>")
        out.append("</tr>")
    out.append("</table></body></html>")
    return "\n".join(out) + "\n"


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def matrix(specs: list[str], *, report: pathlib.Path, profile: str = "ci",
           extra: tuple[str, ...] = (), log=sys.stderr) -> dict:
    out = report.with_suffix(".runs")
    out.mkdir(parents=True, exist_ok=True)
    reports = {}
    for spec in specs:
        print(f"matrix: {spec} ...", file=log, flush=True)
        reports[spec] = run_one(spec, out, profile=profile, extra=extra)
    write_atomically(report, html(reports))
    write_atomically(report.with_suffix(".md"), markdown(reports))
    summary = {spec: (r.implementation if r else {"problem": p}) for spec, (r, p) in
               reports.items()}
    write_atomically(report.with_suffix(".json"), json.dumps(summary, indent=1, default=str))
    return reports


def add_parser(commands) -> None:
    parser = commands.add_parser("matrix", help="the ci profile against several "
                                 "implementations, as one table")
    parser.add_argument("--impl", dest="impls", action="append", default=[])
    parser.add_argument("--systems", action="store_true",
                        help="also every system this directory can run: the reference, the "
                        "fast implementation, each adapter whose package imports, MXNet "
                        "where .venv-mxnet is, TensorFlow.js where adapters/tfjs is set up")
    parser.add_argument("--report", required=True, help="the HTML table; PATH.md beside it "
                        "is the markdown for README.md")
    parser.add_argument("--profile", default="ci", choices=["ci", "dev", "nightly"])
    parser.add_argument("--max-examples", type=int, default=None,
                        help="Hypothesis examples per check, instead of the profile's")


def run(args) -> int:
    extra = (f"--max-examples={args.max_examples}",) if args.max_examples else ()
    impls = args.impls + ([s for s in systems(pathlib.Path.cwd()) if s not in args.impls]
                          if args.systems else [])
    if not impls:
        raise ValueError("name the implementations with --impl (repeatable), or --systems")
    reports = matrix(impls, report=pathlib.Path(args.report), profile=args.profile,
                     extra=extra)
    print(markdown(reports))
    return 0 if all(report is not None for report, _ in reports.values()) else 1

