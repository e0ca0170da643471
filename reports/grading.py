"""Grading a class from its runs' reports (docs/grading.md): a rubric in the spec's terms,
each submission's score by area, Gradescope's results.json, the gradebook's CSV, and what
the class has in common.

Nothing here runs anything: `gradient-conformance grade` (conformance/commands/grade.py)
runs the suite against each submission and hands the reports here, each of which counts its
tests by area (conformance/areas.py, `area_of`: read from the checks themselves),
with every area there is (`area_names`). The rubric gives each area points; a submission's
score in an area is those points times the share of the area's tests that passed.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import math
import tomllib
from dataclasses import dataclass

from gradient_conformance.reports.records import Divergence, Report, crash_cause, visible

DEFAULT_POINTS = 10.0
# Gradescope's visibility values (its autograder specification, "results.json").
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


@dataclass(frozen=True)
class Area:
    """An area of the rubric: its points, and whether students see it before the grades are
    published (Gradescope's `visibility`)."""

    name: str
    points: float
    visibility: str = "visible"


@dataclass(frozen=True)
class Rubric:
    areas: tuple[Area, ...]
    known: tuple[str, ...] = ()  # every area a test can count in (areas.area_names)
    source: str = "the default rubric: every area 10 points, visible"

    def of(self, name: str) -> Area | None:
        return next((a for a in self.areas if a.name == name), None)

    @property
    def left_out(self) -> list[str]:
        """The areas tests count in that the rubric gives no points to."""
        given = {a.name for a in self.areas}
        return [name for name in self.known if name not in given]

    @property
    def total(self) -> float:
        return sum(a.points for a in self.areas)


def default_rubric(known: list[str]) -> Rubric:
    """Every area of `known` (areas.area_names), DEFAULT_POINTS each, visible."""
    names = tuple(sorted(set(known)))
    return Rubric(tuple(Area(name, DEFAULT_POINTS) for name in names), names)


def load_rubric(text: str, where: str, known: list[str]) -> Rubric:
    """A rubric from TOML: a table per area, `[area."The walk"]` with `points` (a number, 0
    or more) and `visibility` (one of VISIBILITIES; "visible" when left out). An area not
    among `known` (areas.area_names), a key the rubric does not know, or a bad value is a
    ValueError naming it; an area left out of the file earns nothing and costs nothing."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as problem:
        raise ValueError(f"{where}: not TOML: {problem}") from None
    known = sorted(set(known))
    extra = set(data) - {"area"}
    if extra or not isinstance(data.get("area"), dict) or not data["area"]:
        raise ValueError(f"{where}: a rubric is tables [area.\"NAME\"] with points (and "
                         f"visibility); found {', '.join(sorted(extra)) or 'no area'}")
    areas = []
    for name, entry in data["area"].items():
        if name not in known:
            raise ValueError(f"{where}: [area.\"{name}\"]: no test counts in it; the areas "
                             f"are: {', '.join(known)}")
        if not isinstance(entry, dict) or set(entry) - {"points", "visibility"}:
            raise ValueError(f"{where}: [area.\"{name}\"]: only points and visibility may "
                             "be given")
        points = entry.get("points")
        if isinstance(points, bool) or not isinstance(points, int | float) or \
                not math.isfinite(points) or points < 0:
            raise ValueError(f"{where}: [area.\"{name}\"]: points = {points!r}: give a "
                             "number, 0 or more")
        visibility = entry.get("visibility", "visible")
        if visibility not in VISIBILITIES:
            raise ValueError(f"{where}: [area.\"{name}\"]: visibility = {visibility!r}: one "
                             f"of {', '.join(VISIBILITIES)}")
        areas.append(Area(name, float(points), visibility))
    return Rubric(tuple(areas), tuple(known), f"the rubric {where}")


@dataclass
class AreaScore:
    """One area of one submission: its points earned of `points`, the tests of its checks
    that passed, failed and were skipped, and its first divergence."""

    area: Area
    score: float
    passed: int
    failed: int
    skipped: int
    first: Divergence | None = None


def scores(report: Report | None, rubric: Rubric) -> list[AreaScore]:
    """A submission's score in each area: points times the share of the area's tests that
    passed. A skipped test (a feature declared unsupported, a function not defined) earns
    nothing, as a failed one: it did not pass. A submission whose run ended without a
    report earns nothing anywhere."""
    found = []
    for area in rubric.areas:
        counts = report.areas.get(area.name, {}) if report is not None else {}
        passed, failed, skipped = (counts.get(k, 0) for k in ("passed", "failed", "skipped"))
        ran = passed + failed + skipped
        first = next((d for d in report.divergences if d.area == area.name), None) \
            if report is not None else None
        found.append(AreaScore(area, round(area.points * passed / ran, 4) if ran else 0.0,
                               passed, failed, skipped, first))
    return found


def total(found: list[AreaScore]) -> float:
    """A submission's score: its areas' summed, to four decimals."""
    return round(sum(s.score for s in found), 4)


def first_divergence(d: Divergence) -> str:
    """An area's first divergence as the terminal shows it to the student running the suite
    (reports/terminal.py): what differs, the program with its lines marked, the inputs,
    the values, what the implementation said, the diagnosis and the location; then, in place
    of the grader's own paths to the case file and the command to replay it, the case file's
    text."""
    from gradient_conformance.reports.terminal import terminal_text
    lines = [f"{d.check}: {terminal_text(dataclasses.replace(d, case_file='', replay=''))}"]
    if d.case_text:
        lines += ["", "the program (a case file: gradient-conformance replay FILE "
                  "--impl=YOURS runs it):", d.case_text.rstrip()]
    return visible("\n".join(lines))


def results_json(found: list[AreaScore], *, seconds: float, problem: str = "",
                 said: str = "") -> dict:
    """Gradescope's results.json for one submission: `score`, `execution_time`, `output`,
    and a test per area (`name`, `score`, `max_score`, `status`: passed when every test of
    the area ran and passed, `output`, `visibility`, `tags`)."""
    tests = []
    for s in found:
        ran = s.passed + s.failed + s.skipped
        output = (f"{s.passed} of {ran} tests passed" + (
            f", {s.skipped} skipped (no credit)" if s.skipped else "") if ran else
            "no test of this area ran: no credit")
        if s.first is not None:
            output += "\n\nThe first divergence:\n" + first_divergence(s.first)
        # Said, not left to Gradescope to infer from the points: an area worth 0 points
        # whose tests failed has failed.
        whole = ran > 0 and s.failed == 0 and s.skipped == 0
        tests.append({"name": s.area.name, "score": s.score, "max_score": s.area.points,
                      "status": "passed" if whole else "failed", "output": output,
                      "visibility": s.area.visibility, "tags": [s.area.name]})
    return {"score": total(found),
            "execution_time": round(seconds), "output": problem or said,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


def gradebook(rows: list[tuple[str, list[AreaScore]]], rubric: Rubric) -> str:
    """The CSV of every score: a row per submission, its total and each area's."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["submission", "score", "max_score", *(a.name for a in rubric.areas)])
    for ident, found in rows:
        writer.writerow([ident, _number(total(found)), _number(rubric.total),
                         *(_number(s.score) for s in found)])
    return out.getvalue()


def _number(value: float) -> str:
    """A score as results.json has it (four decimals at most), without trailing zeros."""
    return f"{value:.4f}".rstrip("0").rstrip(".")


@dataclass
class Cause:
    """What several submissions have in common: a variant of the spec the diagnosis named
    (`name`), a crash of one exception type, or a run that ended without a report; the
    submissions that show it, and the shortest program that shows it."""

    says: str
    name: str
    submissions: list[str]
    program: str = ""
    shown_by: str = ""


def causes(runs: dict[str, tuple[Report | None, str]]) -> list[Cause]:
    """The class's common causes, the most widespread first: each variant a diagnosis
    named (alone; several the programs did not tell apart, as one cause; or in a pair),
    each crash by exception type, and each kind of run that ended without a report."""
    found: dict[str, Cause] = {}

    def take(key: str, says: str, name: str, ident: str, d: Divergence | None) -> None:
        cause = found.setdefault(key, Cause(says, name, []))
        if ident not in cause.submissions:
            cause.submissions.append(ident)
        text = d.case_text if d is not None else ""
        if text and (not cause.program or len(text) < len(cause.program)):
            cause.program, cause.shown_by = text, ident
    for ident, (report, problem) in runs.items():
        if report is None:
            kind = problem_kind(problem)
            take(f"problem:{kind}", f"the run ended without a report ({kind})", "", ident,
                 None)
            continue
        # A variant named alone is a cause of this submission; a divergence whose programs
        # did not tell several variants apart is one cause naming them all, unless one of
        # them is named alone elsewhere in the same run (which it is then consistent with).
        named = [d.diagnosis.get("variants", []) for d in report.divergences]
        alone = {vs[0]["name"] for vs in named if len(vs) == 1}
        for d, vs in zip(report.divergences, named, strict=True):
            if len(vs) == 1 or any(v["name"] in alone for v in vs):
                for v in vs:
                    if v["name"] in alone:
                        take(f"variant:{v['name']}", v.get("says", ""), v["name"], ident, d)
            elif vs:
                names = " or ".join(v["name"] for v in vs)
                take(f"either:{names}", "; or ".join(v.get("says", "") for v in vs) +
                     " (the programs run did not tell them apart)", names, ident, d)
            for pair in d.diagnosis.get("pairs", []):
                names = " + ".join(p["name"] for p in pair)
                take(f"pair:{names}", " and ".join(p.get("says", "") for p in pair), names,
                     ident, d)
            crash = crash_cause(d)
            if crash is not None:
                take(f"crash:{crash[0]}", f"crashes with {crash[0]}", "", ident, d)
    return sorted(found.values(), key=lambda c: (-len(c.submissions), c.name, c.says))


def problem_kind(problem: str) -> str:
    """What kind of problem kept a run from its report, without its details (which may
    quote a submission's files, and so name its student): the text before the first colon
    ("exit status 2", "did not finish", "no implementation to load")."""
    return problem.split(":")[0]


def anonymous(idents: list[str], key: str = "") -> dict[str, str]:
    """Each submission's name on the class page unless names are asked for: s1, s2, ...,
    zero-padded to one width (s01 ... s16), in an order drawn from `key` (a secret `grade`
    draws for each run; grade.json keeps the ids it dealt, never the key): not the order of
    the submissions' own ids, which a class list would undo. Without a key, the ids'
    order."""
    width = len(str(len(idents)))
    order = sorted(idents, key=lambda i: hashlib.sha256(f"{key}\0{i}".encode()).hexdigest()) \
        if key else sorted(idents)
    return {ident: f"s{k:0{width}d}" for k, ident in enumerate(order, start=1)}


def _histogram(totals: list[float], top: float) -> str:
    """The score distribution as an inline SVG: ten bins of the maximum score."""
    from html import escape
    bins = [0] * 10
    for t in totals:
        bins[min(9, int(10 * t / top)) if top else 0] += 1
    tallest = max(bins) or 1
    width, height, bar = 420, 160, 40
    # Below the bars: the bins' labels, and the axis's, with room for its descenders.
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height + 56}' "
             "role='img' aria-label='the score distribution'>"]
    for k, n in enumerate(bins):
        h = round(height * n / tallest)
        x = 10 + k * bar
        parts.append(f"<rect x='{x}' y='{height - h + 20}' width='{bar - 4}' height='{h}' "
                     f"fill='#4a7ab5'><title>{escape(f'{k * 10}-{k * 10 + 10} %: {n}')}"
                     "</title></rect>")
        parts.append(f"<text x='{x + bar / 2 - 2}' y='{height + 35}' font-size='11' "
                     f"text-anchor='middle'>{k * 10}</text>")
        if n:
            parts.append(f"<text x='{x + bar / 2 - 2}' y='{height - h + 15}' font-size='11' "
                         f"text-anchor='middle'>{n}</text>")
    parts.append(f"<text x='{width / 2}' y='{height + 48}' font-size='11' "
                 "text-anchor='middle'>score, % of the maximum</text></svg>")
    return "".join(parts)


def class_page(rows: list[tuple[str, list[AreaScore]]], runs: dict[str, tuple[Report | None,
               str]], rubric: Rubric, *, about: str, names: bool = False,
               paths: dict[str, list[str]] | None = None,
               ids: dict[str, str] | None = None) -> str:
    """The class page: the score distribution, per area the share of the class with every
    test passed and the mean score, and the common causes with the submissions that show
    each and the shortest program that does; submissions by anonymous ids unless `names`
    (`ids`, else `anonymous`'s in the ids' order), listed in the order of those ids, a run
    without a report by the kind of its problem alone, and each of a submission's `paths`
    (its files, its results' folder), wherever a program quotes it, by its id too."""
    from html import escape
    shown = {i: i for i, _ in rows} if names else ids or anonymous([i for i, _ in rows])
    named = sorted(((path, shown[i]) for i, listed in (paths or {}).items() if i in shown
                    for path in listed if path), key=lambda pair: -len(pair[0]))

    def scrub(text: str) -> str:
        if names:
            return text
        for path, ident in named:  # the longest first: a folder's file before the folder
            text = text.replace(path, f"<{ident}>")
        return text
    totals = [total(found) for _, found in rows]
    n = len(rows)
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>The class, graded"
           "</title><style>body{font-family:sans-serif;max-width:60em;margin:2em auto;"
           "line-height:1.4}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
           "padding:.2em .6em;text-align:left}pre{background:#f6f6f6;padding:.5em;"
           "overflow:auto;font-size:90%}.n{text-align:right}</style></head><body>",
           "<h1>The class, graded</h1>", f"<p>{escape(about)}</p>"]
    if n:
        mean = sum(totals) / n
        ordered = sorted(totals)
        median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
        out.append(f"<p>{n} submission{'s' if n != 1 else ''}; mean score "
                   f"{mean:.2f} of {rubric.total:g}; median {median:.2f}.</p>")
    out += ["<h2>The scores</h2>", _histogram(totals, rubric.total), "<h2>Per area</h2>",
            "<table><tr><th>area</th><th>points</th><th>every test passed</th>"
            "<th>mean score</th></tr>"]
    for k, area in enumerate(rubric.areas):
        whole = sum(1 for _, found in rows if found[k].failed == 0 and found[k].skipped == 0
                    and found[k].passed > 0)
        mean = sum(found[k].score for _, found in rows) / n if n else 0.0
        ran = any(found[k].passed + found[k].failed + found[k].skipped for _, found in rows)
        passed = f"{whole} of {n}" if ran else "none of its tests ran"
        out.append(f"<tr><td>{escape(area.name)}</td><td class='n'>{area.points:g}</td>"
                   f"<td class='n'>{passed}</td><td class='n'>{mean:.2f}</td></tr>")
    out += ["</table>", "<h2>Common causes</h2>"]
    found_causes = causes(runs)
    if not found_causes:
        out.append("<p>No divergence was explained by a known variant, and nothing crashed."
                   "</p>")
    for c in found_causes:
        who = ", ".join(shown[i] for i in sorted(c.submissions, key=lambda i: shown[i]))
        label = f" [<code>{escape(c.name)}</code>]" if c.name else ""
        out.append(f"<h3>{escape(scrub(c.says))}{label}: {len(c.submissions)} of {n}</h3>"
                   f"<p>{escape(who)}</p>")
        if c.program:
            out.append(f"<p>The shortest program that shows it ({escape(shown[c.shown_by])}"
                       f"'s):</p><pre>{escape(visible(scrub(c.program)))}</pre>")
    out += ["<h2>The submissions</h2>", "<table><tr><th>submission</th><th>score</th>"
            "<th>report</th></tr>"]
    for (ident, _), score in sorted(zip(rows, totals, strict=True),
                                    key=lambda row: shown[row[0][0]]):
        report, problem = runs[ident]
        link = (f"<a href='submissions/{escape(ident)}/report.html'>report</a>"
                if names and report is not None else escape(problem if names else
                                                            problem_kind(problem))
                if report is None else "")
        out.append(f"<tr><td>{escape(shown[ident])}</td><td class='n'>{score:g}</td>"
                   f"<td>{link}</td></tr>")
    out.append("</table></body></html>")
    return "\n".join(out)
