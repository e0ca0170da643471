"""Known divergences by what they are (docs/suite.md, "Known divergences"): `--known FILE` of
signatures or variant names, written by the run itself with `--write-known FILE`; a known
divergence is expected, a new one fails, an entry nothing matched is said to be fixed."""

from __future__ import annotations

import json

import pytest

from gradient_conformance.conformance.known import Known, parse_known
from gradient_conformance.conformance.tallies import Tally
from gradient_conformance.conformance.totals import Totals
from tests.conftest import FAULTS, suite

ORDER = f"{FAULTS}.creation_order"  # sums shares in creation order: two checks find it
# Two checks find it: the case file of the lesson's example, and the gradient bits check
# within its first 80 cases (derandomized: the same cases every run; at 80 the program it
# finds is small, so the failure stage is quick).
CHECKS = ("-k", "gradients_bit_for_bit or accumulation_order", "--max-examples=80")


def test_a_known_file_holds_signatures_and_variants_and_names_a_bad_line():
    entries = parse_known("# a comment\n\nreversed-arrival  # the order bug\n"
                          "test_case_file /  add+mul / bits\n", "k.txt")
    assert [(e.line, e.variant, e.signature) for e in entries] == [
        (3, "reversed-arrival", None), (4, None, ("test_case_file", "add+mul", "bits"))]
    known = Known(entries)
    assert known.explains(("test_case_file", "add+mul", "bits"), []) == \
        "test_case_file / add+mul / bits"
    assert known.explains(("test_case_file", "add", "bits"), ["creation-order"]) is None
    assert known.explains(("x", "y", "z"), ["reversed-arrival"]) == "reversed-arrival"
    for text, said in (("reversed_arrival\n", "k.txt, line 1: 'reversed_arrival' is neither a "
                        "signature (CHECK / SUBJECT / KIND) nor a variant of the catalogue; "
                        "did you mean reversed-arrival?"),
                       ("\na / b\n", "k.txt, line 2: 'a / b' is not a signature")):
        with pytest.raises(ValueError) as raised:
            parse_known(text, "k.txt")
        assert str(raised.value).startswith(said), raised.value


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
def test_a_known_finding_is_passed_over_and_remembered():
    """The check's search goes on past a known divergence (Hypothesis's reject), and the
    check's record names the entry."""
    from hypothesis.errors import UnsatisfiedAssumption

    from gradient_conformance.conformance.findings import Finding, TapeCase
    from gradient_conformance.conformance.outcome import Outcome
    known, new = (Finding(s, Outcome("ok"), Outcome("ok"), TapeCase([])) for s in ("old", "new"))
    tally = Tally(generated=True)
    tally.passover.expected = lambda finding: "creation-order" if finding is known else None
    with pytest.raises(UnsatisfiedAssumption):
        tally.diverged(known)
    assert tally.last is None and tally.record()["known"] == ["creation-order"]
    tally.diverged(new)
    assert tally.last is new


def test_a_record_s_known_entries_are_checked_and_counted():
    totals = Totals()
    totals.take({"check": "a", "outcome": "xfailed", "known": ["creation-order"]})
    totals.take({"check": "b", "outcome": "xfailed", "known": ["creation-order"]})
    assert totals.known == {"creation-order": 2}
    with pytest.raises(ValueError, match="'known'"):
        totals.take({"check": "c", "outcome": "passed", "known": [3]})


def test_the_run_writes_what_it_found_and_expects_it_next_time(tmp_path):
    """On the case files: each of the fault's divergences there is reproduced by several
    variants, and the experiment on other programs (docs/diagnosis.md, "Confirmation")
    tells them apart, so the file names the bug by its variant."""
    written = tmp_path / "known.txt"
    files = ("-k", "case_file")
    code, output, _ = suite(ORDER, *files, "-q", f"--write-known={written}", cwd=tmp_path)
    assert code == 1, output[-3000:]
    failed = int(output.splitlines()[-1].split(" failed")[0].split()[-1])
    assert "known divergences written: known.txt (--known reads it)" in output
    text = written.read_text()
    entries = parse_known(text, "known.txt")
    assert [e.variant for e in entries] == ["creation-order"], text
    # Its own file, read back: every divergence is expected, none is new, the run is green.
    code, output, _ = suite(ORDER, *files, "-q", f"--known={written}", cwd=tmp_path)
    assert code == 0, output[-3000:]
    assert f"{failed} xfailed" in output and " failed" not in output.splitlines()[-1], \
        output[-1500:]
    assert "known divergence found again, expected: creation-order (1 check)" in output


def test_a_variant_names_the_bug_wherever_it_shows_and_a_new_one_still_fails(tmp_path):
    (tmp_path / "k.txt").write_text("creation-order\nreversed-arrival\n"
                                    "test_tape_backprop / mul / bits\n")
    report = tmp_path / "r.json"
    # Without shrinking: a variant names the bug whatever the size of the program it shows in.
    code, output, _ = suite(ORDER, *CHECKS, "--no-shrink", "-q", "--known=k.txt",
                            f"--report-json={report}", cwd=tmp_path)
    assert code == 0, output[-3000:]
    assert "known divergence found again, expected: creation-order (2 checks)" in output
    assert ("known entry matched nothing in this run (fixed, as far as this run looked): "
            "reversed-arrival") in output
    assert "known entry not looked for: test_tape_backprop / mul / bits (test_tape_backprop " \
           "did not run)" in output
    data = json.loads(report.read_text())
    assert data["divergences"] == [] and data["checks"]["test_gradients_bit_for_bit"] == \
        {"xfailed": 1}
    assert any(n.startswith("known divergence found again") for n in data["notes"])
    # Known for another fault's bug only: this one's divergences are new, and fail.
    (tmp_path / "k.txt").write_text("flush-results\n")
    code, output, _ = suite(ORDER, *CHECKS, "--no-shrink", "-q", "--known=k.txt",
                            cwd=tmp_path)
    assert code == 1 and "2 failed" in output.splitlines()[-1], output[-2000:]
    assert "matched nothing in this run (fixed, as far as this run looked): flush-results" \
        in output


def test_a_bad_known_file_is_a_usage_error_naming_its_line(tmp_path):
    (tmp_path / "k.txt").write_text("creation-order\nnot a thing\n")
    code, output, _ = suite(ORDER, "--known=k.txt", cwd=tmp_path)
    assert code == 2, output[-2000:]
    assert "--known k.txt, line 2: 'not a thing' is neither a signature" in output
    assert "Traceback" not in output


def test_a_known_variant_names_a_finding_only_where_other_programs_confirm_it(tmp_path):
    """A --known variant that reproduces a finding names it only when the experiment on
    other programs confirms it for this implementation (docs/diagnosis.md, "Confirmation"):
    where-both reproduces the where fault's finding at a g of -0.0 (tests/test_confirm.py)
    and is refuted elsewhere, so the finding is new, saying why; run on where-both itself,
    the same entry stays known."""
    from pathlib import Path

    from gradient_conformance.conformance.failure import FailureStage
    from gradient_conformance.conformance.transports.loading import load
    from tests.conftest import ROOT
    from tests.test_confirm import WHERE, _finding

    def sorted_for(impl_spec: str):
        impl = load(impl_spec)
        try:
            tally = Tally(generated=True)
            finding = _finding(impl, WHERE, [1.5])
            tally.passover.matched = {"where-both"}
            tally.passover.matched_findings = {"where-both": finding}
            stage = FailureStage(spec=impl_spec, base=Path(tmp_path), cases_dir=None,
                                 known=Known(parse_known("where-both\n", "k.txt")))
            return stage.sort_known([], tally, unsatisfiable=True, check="c", test_id="t",
                                    impl=impl)
        finally:
            impl.close()
    refuted = sorted_for(str(ROOT / "tests" / "impls" / "where_negative_zero.py"))
    assert refuted.matched == [] and not refuted.expected and len(refuted.new) == 1
    assert "the --known entry where-both reproduces it, but the implementation did otherwise " \
        "on " in refuted.new[0].description
    confirmed = sorted_for("variant:where-both")
    assert confirmed.matched == ["where-both"] and confirmed.expected and confirmed.new == []


def test_a_reduction_never_makes_a_new_divergence_a_known_one():
    """The reducer keeps "not known" with the signature: pretending every program smaller
    than the finding's is known, a finding that reduces without that is kept whole."""
    from gradient_conformance.conformance.reduce import reduce_finding
    from gradient_conformance.conformance.transports.loading import load
    from tests.test_confirm import _finding
    source = ("%a = buffer slot=0 dtype=f32 shape=[]\n%o = buffer slot=1 dtype=f32 shape=[]\n"
              "%x = load %a\n%s = sin %x\n%t = add %s 1.0\n%y = mul %x %x\n%z = add %y %x\n"
              "%g = gradient %z %x\nstore %o %g\nstore %a %t\n")
    impl = load("variant:reversed-arrival")
    try:
        finding = _finding(impl, source, [0.3])
        assert finding.want.buffers[1].tobytes() != finding.got.buffers[1].tobytes()
        free = reduce_finding(finding, impl)
        kept = reduce_finding(finding, impl, known=lambda f: "smaller" if f.case.size < 10
                              else None)
    finally:
        impl.close()
    assert free.before == 10 and free.after < 10 and kept.after == 10, (free, kept)
    assert kept.finding.case.reading.source == finding.case.reading.source


def test_write_known_writes_no_line_that_expects_every_failure_of_a_check():
    """A divergence whose signature names no subject (a failure described by its text only)
    is left out of the written file, which says so: a line `CHECK /  / failed` would expect
    every failure of the check, the next bug's too."""
    from gradient_conformance.conformance.known import entry_for, known_text
    from gradient_conformance.reports.records import Divergence
    blank = Divergence(check="test_c", test_id="t", summary="it failed",
                       signature=("test_c", "", "failed"))
    named = Divergence(check="test_c", test_id="u", summary="bits",
                       signature=("test_c", "add", "bits"))
    assert entry_for(blank) is None and entry_for(named) == "test_c / add / bits"
    text = known_text([blank, named], [])
    entries = parse_known(text, "k.txt")
    assert [e.text for e in entries] == ["test_c / add / bits"], text
    assert "# Left out: 1 divergence of test_c whose signature names no subject" in text
