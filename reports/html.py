"""The HTML report: one self-contained page (no script, no network at view time) from a
`Report`. docs/reports.md, "Reports".

`render(report)` is a pure function. Jinja2 escapes every value it prints (autoescape), and
that matters: error messages, stderr and even program text come from the implementation under
test. The one piece of markup built here, the ulp chart, escapes what it prints itself.
"""

from __future__ import annotations

import math
from html import escape

import jinja2
import markupsafe

from gradient_conformance.reports.records import Divergence, Report, diagnoses, visible
from gradient_conformance.reports.terminal import is_tape

# The columns of the checks table, those a run has: a fuzz run counts cases, not tests.
OUTCOMES = ("cases", "passed", "failed", "skipped", "xfailed")


def render(report: Report) -> str:
    # finalize: every value printed shows its control characters as escapes, whatever made
    # the records (this run, or a JSON file of another).
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("gradient_conformance.reports"), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        finalize=lambda value: visible(value) if isinstance(value, str) and not isinstance(
            value, markupsafe.Markup) else value)
    checks = sorted(report.checks)
    outcomes = [o for o in OUTCOMES if o == "failed" or any(o in per for per in
                                                             report.checks.values())]
    links: dict[str, list[int]] = {}
    for k, d in enumerate(report.divergences, start=1):
        links.setdefault(d.check, []).append(k)
    return environment.get_template("report.html.j2").render(
        report=report, checks=checks, outcomes=outcomes, links=links,
        summary=diagnoses(report.divergences), ops=op_view(report), shade=shade,
        chart=ulp_chart(report.ulps),
        totals={o: sum(report.checks[c].get(o, 0) for c in checks) for o in outcomes},
        lines=_numbered, short=_short, breakable=_breakable, coverage=coverage_view(report))


def coverage_view(report: Report) -> dict | None:
    """The report's conditions (docs/generators.md, "Conditions"), as the page shows them, from data
    that may have been read back from a file: None unless the figures are whole numbers
    that fit together; names and descriptions only where they are strings."""
    cov = report.coverage if isinstance(report.coverage, dict) else {}
    model, reached = cov.get("model"), cov.get("reached")
    if type(model) is not int or type(reached) is not int or not 0 <= reached <= model > 0:
        return None
    said, named = cov.get("says"), cov.get("unreached")
    says: dict = said if isinstance(said, dict) else {}
    listed: list = named if isinstance(named, list) else []
    unreached = [(n, says[n] if isinstance(says.get(n), str) else "") for n in listed
                 if isinstance(n, str)]
    alone = cov.get("generated_reached")
    # Per check, the conditions of the model it took (not its products and pairs), as the
    # run counted them (conformance/totals.py, `coverage`).
    counted = cov.get("checks")
    per_check: dict = counted if isinstance(counted, dict) else {}
    checks = [(str(c), n) for c, n in sorted(per_check.items(), key=lambda kv: str(kv[0]))
              if type(n) is int and 0 < n <= model]
    return {"model": model, "reached": reached, "share": 100 * reached / model,
            "alone": alone if type(alone) is int and 0 <= alone <= reached else None,
            "checks": checks, "unreached": unreached,
            "products": _figures(cov.get("products")), "pairs": _figures(cov.get("pairs"))}


def _figures(value) -> dict | None:
    """A share of the products or the pairs (conformance/totals.py, `_share`), read back as
    data: None unless its figures are whole numbers that fit together."""
    if not isinstance(value, dict):
        return None
    model, reached, alone = (value.get(k) for k in ("model", "reached", "generated_reached"))
    if type(model) is not int or type(reached) is not int or type(alone) is not int or \
            not 0 <= alone <= reached <= model > 0:
        return None
    return {"model": model, "reached": reached, "alone": alone,
            "share": 100 * reached / model, "alone_share": 100 * alone / model}


# Location kinds that name an op's own rule (a share) or value: the others (a fold, a
# blocked edge, hash consing, a literal, a crash) are the walk's, the text's or the process's.
OP_KINDS = frozenset({"value", "share"})


def implicated(d: Divergence) -> set[str]:
    """The ops whose rule or value a divergence's explanation implicates: those a variant
    (or a pair) that reproduces it changes, and the op of the statement located, when what
    departs there is that op's share or value."""
    diagnosis = d.diagnosis if isinstance(d.diagnosis, dict) else {}
    named = [v for v in diagnosis.get("variants", []) if isinstance(v, dict)]
    named += [v for pair in diagnosis.get("pairs", []) if isinstance(pair, list)
              for v in pair if isinstance(v, dict)]
    found = {str(op) for v in named for op in v.get("ops", []) if isinstance(op, str)}
    location = d.location if isinstance(d.location, dict) else {}
    if location.get("kind") in OP_KINDS and isinstance(location.get("op"), str):
        found.add(location["op"])
    return found


def op_view(report: Report) -> dict:
    """The report's op table (docs/reports.md, "Reports"): the ops an explanation implicates, each
    check's divergences over its cases with their ratio (which shades the cell); what the
    explanations point at instead, when no op is; and the tape checks apart."""
    programs = [(d, implicated(d)) for d in report.divergences if not is_tape(d)]
    named = set().union(*(ops for _, ops in programs))
    ops = [op for op in sorted(report.ops) if op in named and op != "tape"]
    columns = sorted({c for op in ops for c in report.ops[op]})
    rows = []
    for op in ops:
        cells = []
        for c in columns:
            cases, found = (report.ops[op].get(c) or [0, 0])[:2]
            cells.append({"cases": cases, "found": found, "ratio": _ratio(found, cases)})
        rows.append({"op": op, "cells": cells})
    elsewhere: dict[str, int] = {}
    for d, ops_of_d in programs:
        if not ops_of_d:
            kind = d.location.get("kind") if isinstance(d.location, dict) else None
            what = {"fold": "the order of a sum (a fold)", "blocked": "a blocked edge",
                    "hash-consing": "hash consing", "literal": "a literal",
                    "rejection": "a rejection", "crash": "a crash"}.get(str(kind), "")
            what = what or ("no location" if not kind else str(kind))
            at = d.location.get("op") if isinstance(d.location, dict) else None
            if isinstance(at, str) and at and d.location.get("line"):
                what += f" at `{at}`"  # the statement located, said with its op
            elsewhere[what] = elsewhere.get(what, 0) + 1
    # An op a location names is not one "no explanation implicates", whatever the kind.
    located = {str(d.location.get("op")) for d, _ in programs
               if isinstance(d.location, dict) and d.location.get("line")}
    tapes = []
    tape_checks = sorted({c for c in report.checks if c.startswith("test_tape")}
                         | {d.check for d in report.divergences if is_tape(d)})
    for c in tape_checks:
        of_check = [d for d in report.divergences if is_tape(d) and d.check == c]
        cases = report.cases.get(c, 0) if isinstance(report.cases, dict) else 0
        cases = cases if type(cases) is int else 0
        kinds = sorted({str(d.location.get("kind")) for d in of_check
                        if isinstance(d.location, dict) and d.location.get("kind")})
        variants = sorted({str(v.get("name")) for d in of_check for v in
                           (d.diagnosis or {}).get("variants", []) if isinstance(v, dict)})
        if not cases and not of_check:
            continue  # skipped: the implementation defines no backprop()
        tapes.append({"check": c, "cases": cases, "found": len(of_check),
                      "ratio": _ratio(len(of_check), cases),
                      "kinds": kinds, "variants": variants})
    return {"rows": rows, "columns": columns, "elsewhere": sorted(elsewhere.items()),
            "left_out": sorted(op for op in report.ops
                               if op not in named and op not in located and op != "tape"),
            "tapes": tapes}


def _ratio(found: int, cases: int) -> float:
    """Divergences over cases; divergences where no case was counted make the whole."""
    return found / cases if cases else (1.0 if found else 0.0)


def shade(ratio: float) -> str:
    """A cell's background by its ratio of divergences to cases: none at 0, faint for one
    in many, deep for every case."""
    if ratio <= 0:
        return ""
    return f"background: rgba(214, 39, 40, {0.12 + 0.78 * min(ratio, 1.0):.2f})"


def _short(check: str) -> str:
    """A check's name as a column heading: without `test_`, and breakable at its words."""
    return check.removeprefix("test_").replace("_", " ")


def _breakable(name: str) -> markupsafe.Markup:
    """A check's name, escaped, that may break after its underscores in a narrow column."""
    return markupsafe.Markup("_<wbr>").join(markupsafe.escape(visible(part))
                                            for part in name.split("_"))


def _numbered(source: str, highlight) -> list[tuple[int, str, bool]]:
    marked = set(highlight)
    return [(k, text, k in marked) for k, text in enumerate(source.splitlines(), start=1)]


def ulp_chart(ulps: dict[str, dict], *, width: int = 640, row: int = 22) -> str:
    """An inline SVG bar chart: per op, the largest forward error seen, in ulps, on a log
    scale (0 ulps draws no bar), with the bound the implementation declared as a tick.
    Empty when nothing was measured."""
    if not ulps:
        return ""
    label, right = 70, 230
    span = width - label - right
    top = max([1.0] + [float(v.get("max", 0)) for v in ulps.values()] +
              [float(v.get("declared", 0)) for v in ulps.values()])

    def x(value: float) -> float:
        return label + span * math.log2(1 + value) / math.log2(1 + top)

    height = row * len(ulps) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
             f'height="{height}" role="img" aria-label="forward error per op, in ulps">']
    for k, op in enumerate(sorted(ulps)):
        v = ulps[op]
        worst, declared = int(v.get("max", 0)), int(v.get("declared", 0))
        y = 10 + k * row
        over = worst > declared
        parts.append(f'<text x="{label - 6}" y="{y + 14}" text-anchor="end">'
                     f'{escape(visible(op))}</text>')
        if worst:
            parts.append(f'<rect x="{label}" y="{y + 3}" width="{x(worst) - label:.1f}" '
                         f'height="{row - 8}" class="{"bad" if over else "ok"}"/>')
        else:  # no error at all: a dot, so that the row does not read as missing
            parts.append(f'<circle cx="{label + 4}" cy="{y + row / 2}" r="4" class="ok"/>')
        parts.append(f'<line x1="{x(declared):.1f}" x2="{x(declared):.1f}" y1="{y}" '
                     f'y2="{y + row - 2}" class="bound"/>')
        mean = float(v.get("mean", 0.0))
        parts.append(f'<text x="{width - right + 6}" y="{y + 14}">max {worst}, mean '
                     f'{mean:.3g} ({int(v.get("samples", 0))} compared)</text>')
    parts.append(f'<text x="{label}" y="{height - 4}" class="axis">0 ulps</text>')
    parts.append(f'<text x="{label + span}" y="{height - 4}" text-anchor="end" class="axis">'
                 f'{top:g} ulps (log scale; the tick is the declared bound)</text>')
    parts.append("</svg>")
    return "\n".join(parts)
