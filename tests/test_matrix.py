"""The conformance matrix as a page (conformance/commands/matrix.py; docs/reports.md, "The
conformance table"): systems by checks, each cell linking to the system's own report, and
what changed since the previous matrix at the same path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gradient_conformance.reports.matrix import changes, html, stem_of, summary
from gradient_conformance.reports.records import Divergence, Report
from tests.conftest import FAST, ROOT


def _report(*signatures: tuple[str, str, str]) -> Report:
    divergences = [Divergence(check=s[0], test_id=f"{s[0]}[x]", summary=f"{s[1]} differs",
                              signature=s) for s in signatures]
    failed = {s[0] for s in signatures}
    checks = {c: {"failed": 1} if c in failed else {"passed": 1}
              for c in ("test_case_file", "test_gradients_bit_for_bit")}
    return Report(implementation={"name": "sys", "version": "1"}, divergences=divergences,
                  checks=checks)


def test_the_page_says_what_is_new_and_what_was_fixed():
    kept = ("test_case_file", "recip", "bits")
    gone = ("test_case_file", "sqrt", "bits")
    came = ("test_gradients_bit_for_bit", "mul", "bits")
    before = summary({"a": (_report(kept, gone), ""), "old": (_report(), "")}, "2026-12-01")
    now = {"a": (_report(kept, came), ""), "b": (None, "exit status 4: no module")}
    current = summary(now, "2026-12-02")
    change = changes(json.loads(json.dumps(before)), current)
    assert change["a"] == {"new": {" / ".join(came): "mul differs"},
                           "fixed": {" / ".join(gone): "sqrt differs"}}
    assert change["b"] == {"only": "now"} and change["old"] == {"only": "before"}
    page = html(now, runs="m.runs", previous=before, current=current)
    assert "<h2>Since the previous matrix (2026-12-01)</h2>" in page
    assert "1 new, 1 fixed" in page and "new to the matrix" in page
    assert "not run this time" in page
    # Cells link to the system's report, at the check; the new divergence's cell is marked.
    assert "<a href='m.runs/a.html#check-test_case_file'>fail</a>" in page
    assert "<td class='fail new'><a href='m.runs/a.html#check-test_gradients_bit_for_bit'>" \
        in page
    assert "m.runs/b.html" not in page  # a system that did not run has no report
    older = html(now, runs="m.runs", previous={"date": "", "systems": {}}, current=current)
    assert "The previous matrix kept no divergences to compare with." in older
    assert "new to the matrix" not in older


def test_a_matrix_kept_before_the_one_spelling_compares_alike():
    """A matrix written before the signature had one spelling joined its parts with " | ":
    read again, the same divergences are the same."""
    kept = ("test_case_file", "recip", "bits")
    before = summary({"a": (_report(kept), "")}, "2026-12-01")
    before["systems"]["a"]["divergences"] = {" | ".join(kept): "recip differs"}
    change = changes(before, summary({"a": (_report(kept), "")}, "2026-12-02"))
    assert change["a"] == {"new": {}, "fixed": {}}


def test_two_matrices_at_one_path_compare(tmp_path):
    """The second run of a matrix reads the first's JSON: the same system, the same
    divergences, said so; and the cells link to reports that exist. (mine.py declares no
    CAPABILITIES, so it claims a correctly rounded exp2 that the fast one does not have: a
    divergence in both runs.)"""
    (tmp_path / "mine.py").write_text(f"from {FAST} import build  # noqa: F401\n")
    command = [sys.executable, "-m", "gradient_conformance", "matrix", "--impl", "mine",
               "--report", "out/m.html", "--max-examples", "2", "-k", "case_file and transcend"]
    for _ in range(2):
        run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                             timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
    page = (tmp_path / "out" / "m.html").read_text()
    kept = json.loads((tmp_path / "out" / "m.json").read_text())
    assert kept["date"] and "divergences" in kept["systems"]["mine"]
    assert "<code>mine</code>: the same divergences" in page
    assert (tmp_path / "out" / "m.runs" / "mine.html").exists()
    assert "href='m.runs/mine.html#check-test_case_file'" in page
    # The markdown for docs/systems.md: dated, naming no path of this machine.
    written = (tmp_path / "out" / "m.md").read_text()
    assert written.startswith("# How real systems conform\n\nA generated record")
    assert "written by `gradient-conformance matrix --impl mine --report out/m.html " \
        "--max-examples 2 -k 'case_file and transcend'` on 20" in written
    assert str(tmp_path) not in written and sys.prefix not in written


# Systems whose answers depend on what the process ran before, so that a re-check in a
# process of its own cannot reproduce a run's: torch.compile caches what it compiled (measured:
# re-run alone, gradient/attributes_in_any_order.ir timed out, then was refused, where the run
# had accepted it; ops/max_ieee.ir gave +0.0 where the run had -0.0).
HISTORY_DEPENDENT = {"adapters.torch_compile_impl"}


def _every_claim_holds(spec: str, report) -> str:
    """`gradient-conformance recheck` finds every claim of a real system's report true:
    each divergence reproduced, each named variant and decision borne out, each value or
    rejection location probed again (issue 53, docs/commands.md, "Recheck"). Its closing
    line: how many claims it re-checked."""
    checked = subprocess.run([sys.executable, "-m", "gradient_conformance", "recheck",
                              str(report), f"--impl={spec}"], cwd=ROOT, capture_output=True,
                             text=True, timeout=1800)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 0 and "every one holds" in said, (spec, said[-3000:])
    return next(line for line in checked.stdout.splitlines() if "every one holds" in line)


@pytest.mark.slow
def test_the_matrix_of_systems(tmp_path, figures):
    """Second tier: every system this checkout can run (the reference, the fast
    implementation, each adapter whose package `make test` installed, MXNet and TensorFlow.js
    where make set them up), under the ci profile at 40 cases a generated check (`make
    systems` runs it whole, for docs/systems.md; a system's divergences show in the case
    files and enumerations, which run whole, and in the first cases drawn). Each system's
    run ends with a report, not cut short; the reference and the fast implementation pass
    every check they run; each real system's failed checks have their divergences in the
    document, which names no path of this machine, and every claim its report makes holds
    when re-checked outside the run (`recheck`: 0 false names, decisions or locations). Each
    real system's seconds, divergences and claims re-checked are among the figures."""
    from gradient_conformance.adapters.systems import systems
    written = tmp_path / "systems.md"
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "matrix", "--systems",
                          "--max-examples", "40", "--report", str(tmp_path / "matrix.html"),
                          "--markdown", str(written)],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    found = systems(ROOT)
    assert len(found) > 2, "no system besides the bundled ones: make test installs some"
    for spec in found:
        report = json.loads((tmp_path / "matrix.runs" / f"{stem_of(spec)}.json").read_text())
        failed = {c for c, n in report["checks"].items() if n.get("failed")}
        assert report["interrupted"] == "", (spec, report["interrupted"])
        if spec in ("reference", "implementations.fast"):
            assert not failed, (spec, failed)
        else:
            assert {d["check"] for d in report["divergences"]} == failed, spec
            if spec not in HISTORY_DEPENDENT:
                said = _every_claim_holds(spec,
                                          tmp_path / "matrix.runs" / f"{stem_of(spec)}.json")
                figures(f"matrix: {spec}: {report['seconds']:.0f} s, "
                        f"{len(report['divergences'])} divergences; {said}")
    text = written.read_text()
    assert str(ROOT) not in text and sys.prefix not in text and str(tmp_path) not in text
    assert text.count("\n| ") >= len(found)  # a row a system
