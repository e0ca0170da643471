"""The reports, replay and vectors of issue 5: what a person sees of a divergence, that
nothing an implementation says can run in the page, and that every saved case replays.
docs/reports.md, "Reports"; docs/commands.md, "Replay" and "Test vectors"."""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from gradient_conformance.conformance.commands.replay import replay
from gradient_conformance.conformance.divergence import describe
from gradient_conformance.conformance.findings import Finding, ProgramCase
from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.reference import cases
from gradient_conformance.reference.tape import load_tape_case
from gradient_conformance.reports.html import render, ulp_chart
from gradient_conformance.reports.records import (
    Divergence,
    Report,
    divergence_to_dict,
    from_json,
    representatives,
    smallest_per_signature,
    to_json,
)
from tests.conftest import FAULTS, ROOT, suite

HOSTILE = str(ROOT / "tests" / "hostile" / "markup_messages.py")
RECIP_FAULT = "gradient_conformance.implementations.faults.recip_form"
RECIP = (ROOT / "cases" / "gradient" / "op_form_recip.ir")


def _suite(tmp_path, impl, *select, extra=(), examples: int | None = 5):
    """Run the conformance suite in a subprocess, as a user would: (status, output)."""
    code, output, _ = suite(impl, "-q", f"--report={tmp_path / 'report.html'}",
                            f"--report-json={tmp_path / 'report.json'}", *extra, "-k",
                            " or ".join(select), examples=examples)
    return code, output


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    """The suite's case files and gradient checks against the recip-form fault (without
    shrinking: what the reports show of a divergence does not depend on its size)."""
    out = tmp_path_factory.mktemp("faulty")
    result = _suite(out, "gradient_conformance.implementations.faults.recip_form", "op_form_recip",
                    "test_gradients_bit_for_bit", "test_forward_error_per_op",
                    extra=("--no-shrink",), examples=None)
    return out, result


def test_a_failing_run_writes_both_reports(faulty_run):
    out, (code, output) = faulty_run
    assert code == 1, output[-2000:]
    report = from_json((out / "report.json").read_text())
    checks = {d.check for d in report.divergences}
    assert {"test_case_file", "test_gradients_bit_for_bit"} <= checks
    assert report.checks["test_case_file"]["failed"] == 1
    assert report.checks["test_forward_error_per_op"]["passed"] == 8
    assert report.implementation["name"] == "fast-fault-recip_form"
    assert set(report.ulps) == {"add", "exp2", "log2", "max", "mul", "recip", "sin", "sqrt"}
    html = (out / "report.html").read_text()
    for d in report.divergences:
        assert d.check in html and d.elements, d
        e = d.elements[0]
        assert e.expected_bits in html and e.actual_bits in html and e.ulps >= 1
        assert d.trace and "received [" in d.trace and d.expanded
        assert d.replay in html.replace("&#39;", "'")
    assert "<svg" in html and "forward error per op" in html


def test_the_differing_output_is_highlighted(faulty_run):
    out, _ = faulty_run
    report = from_json((out / "report.json").read_text())
    d = next(d for d in report.divergences if d.check == "test_case_file")
    lines = d.source.splitlines()
    highlighted = [lines[k - 1] for k in d.highlight]
    slot = d.elements[0].slot
    buffer = next(s.split()[0] for s in lines if f"slot={slot} " in s)
    assert any(t.startswith(f"store {buffer} ") for t in highlighted), highlighted
    assert all(not t.startswith("%x = load") for t in highlighted)
    assert "recip" in d.signature[1].split("+") and d.signature[2] == "bits"


def test_every_saved_divergence_replays(faulty_run):
    out, _ = faulty_run
    report = from_json((out / "report.json").read_text())
    faulty = load("gradient_conformance.implementations.faults.recip_form")
    fast = load("gradient_conformance.implementations.fast")
    for d in report.divergences:
        assert pathlib.Path(d.case_file).parent == out / "report.cases"
        agrees, text = replay(faulty, d.case_file)
        assert not agrees and "DIVERGES" in text
        assert d.elements[0].expected_bits in text and d.elements[0].actual_bits in text
        assert replay(fast, d.case_file)[0]


def test_replay_command_line(faulty_run):
    out, _ = faulty_run
    d = from_json((out / "report.json").read_text()).divergences[0]
    run = subprocess.run(d.replay, shell=True, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1 and "DIVERGES" in run.stdout, run.stdout + run.stderr
    fine = subprocess.run([sys.executable, "-m", "gradient_conformance", "replay", d.case_file,
                           "--impl=reference"], cwd=ROOT, capture_output=True, text=True)
    assert fine.returncode == 0 and "AGREES" in fine.stdout
    bad = subprocess.run([sys.executable, "-m", "gradient_conformance", "replay", "no/such.ir",
                          "--impl=reference"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "no/such.ir" in bad.stderr


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile")
    result = _suite(out, HOSTILE, "op_form_recip")
    return out, result


def test_what_an_implementation_says_is_escaped(hostile_run):
    out, (code, output) = hostile_run
    assert code == 1, output[-2000:]
    html = (out / "report.html").read_text()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;document.body.innerHTML=&#39;PWNED&#39;&lt;/script&gt;" in html
    assert "hostile &lt;b&gt;impl&lt;/b&gt;" in html and "<b>impl</b>" not in html


def test_records_escape_in_a_rendered_report():
    """The pure renderer, with markup in every field a record carries."""
    evil = "<img src=x onerror=alert(1)>"
    d = Divergence(check=evil, test_id=evil, summary=evil, source=f"{evil}\nline", highlight=[1],
                   actual_message=evil, trace=evil, expanded=evil, replay=evil,
                   inputs=[{"slot": 0, "dtype": "f32", "shape": [], "values": [evil],
                            "bits": [evil]}], signature=(evil, evil, evil))
    report = Report(implementation={"name": evil, "version": evil, "spec": evil,
                                    "capabilities": {"unsupported": [evil]}},
                    checks={evil: {"failed": 1}}, ops={evil: {evil: [1, 1]}},
                    ulps={evil: {"max": 1, "declared": 0}}, divergences=[d], notes=[evil])
    html = render(report)
    assert "<img" not in html and "&lt;img" in html


def test_counts_take_the_number_of_their_noun():
    """"1 divergence", "Program (1 statement)": never "1 divergences"."""
    from gradient_conformance.reports.records import counted
    assert (counted(1, "divergence"), counted(0, "divergence"), counted(2, "run")) == \
        ("1 divergence", "0 divergences", "2 runs")
    pages = {n: render(Report(implementation={"name": "x", "version": "", "spec": "x",
                                              "capabilities": {}},
                              checks={"c": {"failed": 1}}, divergences=[Divergence(
                                  "c", "i", "s", source="x\n" * n, statements=n)]))
             for n in (1, 3)}
    assert "Program (1 statement)</h4>" in pages[1] and "Program (3 statements)</h4>" in pages[3]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browse(page: pathlib.Path, tmp_path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", *extra, page.as_uri()],
        capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (make test installs "
                    "Debian's chromium where it can: apt-get, as root)")
def test_a_real_browser_renders_the_failing_check(hostile_run, tmp_path):
    """Chromium opens the report of the hostile implementation: the DOM it renders names the
    failing check and shows the script as text, which therefore never ran."""
    out, _ = hostile_run
    dom = _browse(out / "report.html", tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<h3 class="check">test_case_file</h3>' in dom.stdout
    assert 'id="divergence-count">1<' in dom.stdout
    assert "PWNED" in dom.stdout and "<script" not in dom.stdout.lower()
    shot = tmp_path / "shot.png"
    _browse(out / "report.html", tmp_path, f"--screenshot={shot}", "--window-size=1000,1400")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory):
    """Every check against the recip-form fault: the widest page a run makes."""
    out = tmp_path_factory.mktemp("whole")
    code, output, _ = suite(RECIP_FAULT, "-q", "--max-examples=60", "--no-shrink",
                            f"--report={out / 'r.html'}")
    assert code == 1, output[-3000:]
    return out / "r.html"


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (make test installs "
                    "Debian's chromium where it can: apt-get, as root)")
def test_the_page_fits_1200_pixels_and_links_every_divergence(whole_run, tmp_path):
    """At 1200 px the body has no horizontal overflow, and every check with a divergence
    links to each of its divergences. The page has no script of its own, so the measuring
    one goes into a copy."""
    page = tmp_path / "measured.html"
    page.write_text(whole_run.read_text().replace("</body>", """<script>
        var root = document.documentElement;
        document.body.setAttribute("data-fits", String(root.scrollWidth <= window.innerWidth));
        document.body.setAttribute("data-widths", root.scrollWidth + "/" + window.innerWidth);
        </script></body>"""))
    dom = _browse(page, tmp_path, "--dump-dom", "--window-size=1200,900").stdout
    assert 'data-fits="true"' in dom, re.search(r'data-widths="[^"]*"', dom)
    sections = re.findall(r'<section class="divergence" id="divergence-(\d+)">\s*'
                          r'<h3 class="check">(\w+)</h3>', dom)
    assert sections
    rows = re.findall(r"<tr id=\"check-(\w+)\" class=\"\w+\">\s*<td>(.*?)</td>(.*?)</tr>",
                      dom, re.S)
    # Each check's row has the id the matrix page links to, and names its check.
    assert all(re.sub(r"<wbr>", "", name) == check for check, name, _ in rows) and rows
    links = {check: set(re.findall(r'href="#divergence-(\d+)"', rest))
             for check, _, rest in rows}
    for number, check in sections:
        assert number in links[check], (check, number, links.get(check))
    shot = tmp_path / "page.png"
    _browse(whole_run, tmp_path, f"--screenshot={shot}", "--window-size=1200,2000")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_json_round_trips_and_refuses_other_schemas():
    source = RECIP.read_text()
    case = cases.parse_case(source)
    slots = cases.buffer_slots(source)
    buffers = cases.initial_buffers(case, slots)
    want = Outcome("ok", {1: np.array(1.0, np.float32)})
    got = Outcome("ok", {1: np.array(-0.0, np.float32)})
    d = describe("check", "id", Finding("s", want, got, ProgramCase(Reading(source), buffers)))
    assert d.signature[2] == "bits" and d.elements[0].ulps is not None
    report = Report(implementation={"name": "x"}, divergences=[d])
    again = from_json(to_json(report))
    assert again == report
    data = json.loads(to_json(report))
    data["schema"] = "gradient-conformance-report/2"
    with pytest.raises(ValueError, match="schema"):
        from_json(json.dumps(data))


def test_kinds_of_difference():
    src = "%a = buffer slot=0 dtype=f32 shape=[4]\n%x = load %a\n%y = sqrt %x\nstore %a %y\n"
    want = Outcome("ok", {0: np.array([0.0, 1.0, np.nan, np.inf], np.float32)})
    kinds = []
    for got in ([-0.0, 1.0, np.nan, np.inf], [0.0, np.nan, np.nan, np.inf],
                [0.0, 1.0, np.nan, 3.0], [0.0, 1.5, np.nan, np.inf]):
        d = describe("c", "i", Finding("", want, Outcome("ok", {0: np.array(got, np.float32)}),
                                       ProgramCase(Reading(src))))
        kinds.append(d.signature[2])
    assert kinds == ["signed-zero", "nan", "infinity", "bits"]
    rejected = describe("c", "i", Finding("", want, Outcome("rejected", message="no"),
                                          ProgramCase(Reading(src))))
    assert rejected.signature == ("c", "sqrt", "ok->rejected")


def test_smallest_per_signature():
    a = Divergence("c", "i", "s", source="x\ny\nz", statements=3, signature=("c", "add", "bits"))
    b = Divergence("c", "i", "s", source="x\ny", statements=2, signature=("c", "add", "bits"))
    c = Divergence("c", "i", "s", source="x", statements=1, signature=("c", "mul", "bits"))
    assert smallest_per_signature([a, c, b]) == [b, c]


def test_the_ulp_chart_marks_what_exceeds_the_bound():
    svg = ulp_chart({"sin": {"max": 3, "declared": 1, "mean": 0.5, "samples": 9},
                     "add": {"max": 0, "declared": 0, "mean": 0.0, "samples": 9}})
    assert svg.count('class="bad"') == 1 and svg.count("<rect") == 1
    assert ulp_chart({}) == ""


def test_vectors_export_and_check(tmp_path):
    out = tmp_path / "vectors"
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "vectors", "--out",
                          str(out), "--count", "100"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "index.json").read_text())
    assert manifest["count"] == 100 == len(list(out.glob("*.ir"))) + len(list(out.glob("0*.json")))
    classes = {v["class"].split()[0] for v in manifest["vectors"]}
    assert classes == {"bit-exact", "rejection", "ulp-bounded", "tape-bit-exact",
                       "tape-rejection"}
    tape_fault = load("gradient_conformance.implementations.faults.tape_const_zero")
    tape_vectors = [v for v in manifest["vectors"] if v["class"].startswith("tape")]
    for v in tape_vectors:
        assert v["file"].endswith(".json") and v["kind"].startswith("tape"), v
        case = load_tape_case((out / v["file"]).read_text())
        assert all(float(np.float32(e[1])) == e[1] for e in case["tape"]
                   if e[0] in ("input", "const") and isinstance(e[1], float) and
                   np.isfinite(e[1])), "a leaf that is not exactly an f32"
    assert any(not replay(tape_fault, str(out / v["file"]))[0] for v in tape_vectors)
    reference, fast = load("reference"), load("gradient_conformance.implementations.fast")
    faulty = load("gradient_conformance.implementations.faults.reversed_fold")
    missed = 0
    for v in manifest["vectors"]:
        text = (out / v["file"]).read_text()
        assert hashlib.sha256(text.encode()).hexdigest() == v["sha256"]
        assert f"#: class {v['class']}" in text if v["file"].endswith(".ir") else \
            ('"error"' in text) == (v["class"] == "tape-rejection")
        assert replay(reference, str(out / v["file"]))[0], v
        if v["class"] in ("bit-exact", "tape-bit-exact") and not v["uses"]:
            assert replay(fast, str(out / v["file"]))[0], v
        missed += not replay(faulty, str(out / v["file"]))[0]
    assert missed > 0  # the order-sensitive vectors catch a reversed fold
    again = tmp_path / "again"
    subprocess.run([sys.executable, "-m", "gradient_conformance", "vectors", "--out", str(again),
                    "--count", "100"], cwd=ROOT, check=True, capture_output=True, timeout=600)
    assert (again / "index.json").read_text() == (out / "index.json").read_text()


def test_representatives_merge_what_a_simpler_divergence_explains():
    def d(ops, kind, statements, check="c"):
        return Divergence(check, "i", "s", source="x\n" * statements, statements=statements,
                          signature=(check, ops, kind), ops=ops.split("+"))
    small = d("gradient+recip", "bits", 5)
    shown = representatives([d("add+gradient+recip", "nan", 7), small,
                             d("gradient+recip+sqrt", "signed-zero", 9),
                             d("gradient+mul", "bits", 4), d("gradient+recip", "ok->rejected", 6),
                             d("gradient+recip+add", "bits", 3, check="other")])
    assert [(x.check, x.signature[1], x.signature[2]) for x in shown] == [
        ("c", "gradient+mul", "bits"), ("c", "gradient+recip", "bits"),
        ("c", "gradient+recip", "ok->rejected"), ("other", "gradient+recip+add", "bits")]
    assert small.also == ["c / add+gradient+recip / nan", "c / gradient+recip+sqrt / signed-zero"]


def test_the_report_command_collects_saved_divergences(tmp_path, faulty_run):
    """Fuzz runs' folders, from several machines say, make one report."""
    out, _ = faulty_run
    report = from_json((out / "report.json").read_text())
    for k, d in enumerate(report.divergences):
        folder = tmp_path / f"machine{k}" / "divergences" / f"sig{k}"
        folder.mkdir(parents=True)
        (folder / "0001-x.json").write_text(json.dumps(divergence_to_dict(d)))
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "report",
                          str(tmp_path / "machine0"), str(tmp_path / "machine1"),
                          "--out", str(tmp_path / "all.html")], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1, run.stderr
    html = (tmp_path / "all.html").read_text()
    assert all(d.check in html for d in report.divergences)
    assert (tmp_path / "all.json").exists()


def test_the_spec_command_prints_a_whole_document_it_is_named_by():
    """`spec VECTORS.md` (or `spec vectors`) is VECTORS.md, where it answered "no section";
    and VECTORS.md says what SPEC.md says a slot starts as."""
    for name in ("VECTORS.md", "vectors"):
        run = subprocess.run([sys.executable, "-m", "gradient_conformance", "spec", name],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and run.stdout.startswith("# Test vectors"), run.stderr
    missing = subprocess.run([sys.executable, "-m", "gradient_conformance", "spec", "NOSUCH"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no section 'NOSUCH'" in missing.stderr
    assert "0x7fc0dead" in (ROOT / "VECTORS.md").read_text()


def _explained(check: str, variants: list[dict], location: dict, *, tape: bool = False):
    return Divergence(check=check, test_id=check, summary="s", diagnosis={"variants": variants},
                      location=location, case_name="x.json" if tape else "x.ir",
                      signature=(check, "add+mul", "bits"))


def test_the_op_table_shows_only_implicated_ops_shaded_by_their_ratio():
    """docs/reports.md, "Reports": an order bug lights no op (its explanations point at a fold);
    a rule's bug lights its op alone, the cell as red as divergences over cases; the tape
    checks have their own table."""
    from gradient_conformance.conformance.diagnosis.diagnose import Diagnosis
    from gradient_conformance.reports.html import op_view, shade
    order = Diagnosis(variants=["reversed-arrival"]).to_dict()["variants"]
    recip = Diagnosis(variants=["recip-form"]).to_dict()["variants"]
    assert order[0]["ops"] == [] and recip[0]["ops"] == ["recip"]
    ops = {"add": {"test_gradients_bit_for_bit": [70, 1], "test_case_file": [8, 5]},
           "recip": {"test_gradients_bit_for_bit": [70, 1], "test_case_file": [8, 5]},
           "mul": {"test_gradients_bit_for_bit": [70, 1]}}
    order_bug = Report(implementation={"name": "x", "version": "", "spec": "x",
                                       "capabilities": {}}, ops=ops,
                       divergences=[_explained("test_case_file", order, {"kind": "fold",
                                                                       "op": "mul"})])
    view = op_view(order_bug)
    assert view["rows"] == [] and view["elsewhere"] == [("the order of a sum (a fold)", 1)]
    html = render(order_bug)
    assert 'id="ops"' not in html and "No op's rule or value is implicated" in html
    rule_bug = Report(implementation=order_bug.implementation, ops=ops,
                      divergences=[_explained("test_case_file", recip, {"kind": "share",
                                                                        "op": "recip"})])
    view = op_view(rule_bug)
    assert [row["op"] for row in view["rows"]] == ["recip"]
    cells = {c: cell for c, cell in zip(view["columns"], view["rows"][0]["cells"], strict=True)}
    assert cells["test_case_file"]["ratio"] == 5 / 8
    assert shade(1 / 70) != shade(5 / 8) and shade(0.0) == ""
    assert float(shade(5 / 8).split(", ")[-1][:-1]) > 3 * float(shade(1 / 70).split(", ")[-1][:-1])
    # A value located at an op implicates it though no variant does.
    located = Report(implementation=order_bug.implementation, ops=ops,
                     divergences=[_explained("test_case_file", [], {"kind": "value", "op": "mul"})])
    assert [row["op"] for row in op_view(located)["rows"]] == ["mul"]
    tapes = Report(implementation=order_bug.implementation, checks={"test_tapes_bit_for_bit": {
        "failed": 1}}, cases={"test_tapes_bit_for_bit": 200},
        divergences=[_explained("test_tapes_bit_for_bit",
                                Diagnosis(variants=["tape-const-zero"]).to_dict()["variants"],
                                {"kind": "leaf"}, tape=True)])
    view = op_view(tapes)
    assert view["rows"] == [] and view["tapes"] == [
        {"check": "test_tapes_bit_for_bit", "cases": 200, "found": 1, "ratio": 1 / 200,
         "kinds": ["leaf"], "variants": ["tape-const-zero"]}]
    assert 'id="tapes"' in render(tapes)


def test_the_run_the_saved_case_file_and_replay_number_the_lines_alike(tmp_path):
    """Before, the run said `line 6`, and the saved case file and replay line 13: the file's
    header (the divergence's comments, its expectations) came before the program. The header
    is now after it, and the program's own `#:` lines are left as empty comments, so each
    statement keeps its line."""
    code, output, _ = suite(f"{FAULTS}.recip_form", "-k", "op_form_recip", "--no-shrink",
                            cwd=tmp_path)
    assert code == 1, output[-3000:]
    said = re.search(r"^location: line (\d+), `([^`]*)`", output, re.M)
    assert said, output[-3000:]
    [saved] = (tmp_path / ".gradient-conformance" / "divergences").glob("*.ir")
    lines = saved.read_text().splitlines()
    assert lines[int(said.group(1)) - 1] == said.group(2)
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "replay", str(saved),
                          f"--impl={FAULTS}.recip_form", "--diagnose"], capture_output=True,
                         text=True, timeout=300)
    assert f"location: line {said.group(1)}, `{said.group(2)}`" in run.stdout, run.stdout


def test_a_long_program_line_is_cut_in_the_terminal_and_whole_in_the_report():
    """Before, a 4,300-digit literal printed a hundred terminal lines. The terminal cuts a
    program's line past LINE_LIMIT in the middle, saying how much; the report keeps it."""
    from gradient_conformance.reports.terminal import LINE_LIMIT, terminal_text
    literal = "1." + "3" * 4300
    source = f"%a = buffer slot=0 dtype=f32 shape=[]\n%x = add {literal} 1.0\nstore %a %x\n"
    d = Divergence(check="c", test_id="c", summary="differs", source=source)
    shown = terminal_text(d)
    assert max(len(line) for line in shown.splitlines()) < LINE_LIMIT + 100, shown
    assert f"characters cut, of {len(source.splitlines()[1])}; the report has the line whole" \
        in shown, shown
    assert literal in render(Report(implementation={"name": "x", "version": "", "spec": "x",
                                                    "capabilities": {}},
                                    checks={"c": {"failed": 1}}, divergences=[d]))
