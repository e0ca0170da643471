"""The conformance table as plain functions of reports: the markdown docs/systems.md carries,
the HTML page, and what changed since the previous table kept at the same path.
docs/reports.md, "The conformance table".

Nothing here runs anything: `gradient-conformance matrix` (conformance/commands/matrix.py)
runs the suite against each system and hands the reports here.
"""

from __future__ import annotations

import re
from html import escape

from gradient_conformance.reports.records import Report, visible


def stem_of(spec: str) -> str:
    """The file name of one system's reports in the matrix's runs folder."""
    return "".join(c if c.isalnum() else "_" for c in spec)[:60]


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


def md(text) -> str:
    """Text an implementation gave (its name, its version, a summary), as inert markdown:
    on one line, with invisible characters shown as escapes, HTML's characters as entities
    and markdown's escaped, so that it can neither break the table nor add markup."""
    text = escape(visible(" ".join(str(text).split())), quote=False)
    return re.sub(r"([\\`*_{}\[\]()#+!|~])", r"\\\1", text)


def markdown(reports) -> str:
    checks, rows = table(reports)
    head = ["system", *[c.removeprefix("test_") for c in checks]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [md(row[1])] + [c[0] for c in row[2:]]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Cells: pass, fail or skipped; (passed/failed/skipped) for parametrized "
                 "checks. First divergence of each failed check:")
    lines.append("")
    for row in rows:
        for check, (_, first) in zip(checks, row[2:], strict=True):
            if first:
                lines.append(f"- **{md(row[1])}**, `{check.removeprefix('test_')}`: "
                             f"{md(_one_line(first))}")
    lines += ["", "What each system does instead, as diagnosed "
              "(docs/diagnosis.md, \"Diagnosis\"): the variants of the spec that reproduce its "
              "divergences bit for bit (several, when more than one does), with how many "
              "divergences each explains.", ""]
    named: dict[str, dict] = {}
    for report, _ in reports.values():
        if report is not None and report.divergences:
            lines.append(f"- **{md(report.implementation.get('name'))}**: " +
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


def divergence_key(d) -> str:
    """What a divergence is from one matrix to the next: its signature as the record spells
    it (`Divergence.key`: check / subject / kind), or for one the suite could not describe
    structurally, its check and test."""
    return d.key if any(d.signature) else f"{d.check} / {d.test_id}"


def _keyed(divergences: dict) -> dict:
    """A kept matrix's divergences, keyed as divergence_key keys them now: a matrix written
    before joined a signature's parts with " | "."""
    return {k.replace(" | ", " / "): v for k, v in divergences.items()}


def summary(reports, date: str) -> dict:
    """The matrix's JSON: when, and per system what it is and which divergences it had (key
    -> summary), for the next matrix to compare with."""
    found = {}
    for spec, (report, problem) in reports.items():
        found[spec] = {"problem": problem} if report is None else {
            "implementation": report.implementation, "report": f"{stem_of(spec)}.html",
            "divergences": {divergence_key(d): _one_line(d.summary)
                            for d in report.divergences}}
    return {"date": date, "systems": found}


def changes(previous: dict | None, current: dict) -> dict[str, dict]:
    """spec -> {"new": {key: summary}, "fixed": {key: summary}}, for each system that ran in
    both matrices; a system in one only is {"only": "now" or "before"}."""
    before = (previous or {}).get("systems", {})
    found: dict[str, dict] = {}
    for spec, now in current["systems"].items():
        was = before.get(spec)
        if was is None or "divergences" not in was:
            found[spec] = {"only": "now"} if was is None else {}
            continue
        if "divergences" not in now:
            found[spec] = {}
            continue
        had = _keyed(was["divergences"])
        new = {k: v for k, v in now["divergences"].items() if k not in had}
        fixed = {k: v for k, v in had.items() if k not in now["divergences"]}
        found[spec] = {"new": new, "fixed": fixed}
    found.update({spec: {"only": "before"} for spec in before if spec not in found})
    return found


def html(reports, *, runs: str = "", previous: dict | None = None, current=None) -> str:
    """The page: systems by checks, each cell linking to the system's report in `runs` (a
    folder beside the page), then what changed since `previous`."""
    checks, rows = table(reports)
    current = current or summary(reports, "")
    changed = changes(previous, current) if previous else {}
    out = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
           "<title>Gradient conformance matrix</title><style>",
           "body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}",
           "td,th{border:1px solid #ccc;padding:.3em .5em;vertical-align:top}",
           ".fail{background:#fde2e2}.pass{background:#e6f4e6}.skipped{background:#f2f2f2}",
           "td.new{outline:2px solid #c00}a{color:inherit}",
           "small{color:#555;display:block;max-width:28em}</style></head><body>",
           "<h1>Gradient conformance matrix</h1>"]
    if current.get("date"):
        since = "; a cell outlined in red has a divergence the previous matrix did not" \
            if previous else ""
        out.append(f"<p>{escape(current['date'])}. Each cell links to the system's own "
                   f"report{since}.</p>")
    out.append("<table><tr><th>system</th>")
    out += [f"<th>{escape(c.removeprefix('test_'))}</th>" for c in checks]
    out.append("</tr>")
    for row in rows:
        spec = row[0]
        link = f"{runs}/{stem_of(spec)}.html" if runs and "report" in current["systems"].get(
            spec, {}) else ""
        new_checks = {k.split(" / ")[0] for k in changed.get(spec, {}).get("new", {})}
        out.append(f"<tr><td>{escape(row[1])}<br><code>{escape(spec)}</code></td>")
        for check, (text, first) in zip(checks, row[2:], strict=True):
            klass = (text.split()[0] if text != "-" else "") + \
                (" new" if check in new_checks else "")
            detail = f"<small>{escape(_one_line(first))}</small>" if first else ""
            shown = f"<a href='{escape(link)}#check-{escape(check)}'>{escape(text)}</a>" if link \
                else escape(text)
            out.append(f"<td class='{escape(klass.strip())}'>{shown}{detail}</td>")
        out.append("</tr>")
    out.append("</table>")
    out += _changes_html(previous, changed)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _changes_html(previous: dict | None, changed: dict) -> list[str]:
    if previous is None:
        return ["<h2>Since the previous matrix</h2><p>No previous matrix at this path.</p>"]
    out = [f"<h2>Since the previous matrix ({escape(previous.get('date') or 'undated')})</h2>"]
    if not previous.get("systems"):
        return [*out, "<p>The previous matrix kept no divergences to compare with.</p>"]
    out.append("<ul>")
    for spec, change in changed.items():
        if "only" in change:
            said = "new to the matrix" if change["only"] == "now" else "not run this time"
            out.append(f"<li><code>{escape(spec)}</code>: {said}</li>")
        elif not change:
            out.append(f"<li><code>{escape(spec)}</code>: did not run in one of the two</li>")
        elif not change["new"] and not change["fixed"]:
            out.append(f"<li><code>{escape(spec)}</code>: the same divergences</li>")
        else:
            out.append(f"<li><code>{escape(spec)}</code>: {len(change['new'])} new, "
                       f"{len(change['fixed'])} fixed<ul>")
            out += [f"<li>new: <code>{escape(k)}</code>: {escape(v)}</li>"
                    for k, v in change["new"].items()]
            out += [f"<li>fixed: <code>{escape(k)}</code>: {escape(v)}</li>"
                    for k, v in change["fixed"].items()]
            out.append("</ul></li>")
    return [*out, "</ul>"]


def _one_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
