"""`gradient-conformance recheck`: every claim of a run's JSON report re-checked outside the
run (docs/commands.md, "Recheck"). Its claims hold on a run of a seeded fault; each kind of
claim, made false in the report, is found false; a report with nothing to re-check, or no
report at all, is a usage error. The re-check over the installed real systems, where the
claims are tested, is in the second tier (tests/test_matrix.py)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, suite

FAULT = "variant:max-first-on-zeros"  # a fault the catalogue names, found by case files


def recheck(report, impl: str = FAULT) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "-m", "gradient_conformance", "recheck", str(report),
         f"--impl={impl}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


@functools.cache
def _report(folder) -> dict:
    path = folder / "run.json"
    status, out, _ = suite(FAULT, "-k", "test_case_file and max", f"--report-json={path}")
    assert status == 1, out
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return _report(tmp_path_factory.mktemp("recheck"))


def test_the_claims_of_a_run_hold_when_re_checked(report, tmp_path):
    assert any(d["diagnosis"]["variants"] for d in report["divergences"])
    assert any(d["location"].get("kind") == "value" for d in report["divergences"])
    path = tmp_path / "run.json"
    path.write_text(json.dumps(report))
    status, out = recheck(path)
    assert status == 0, out
    assert "every one holds" in out
    for kind in ("reproduced", "named", "located"):
        line = next(x for x in out.splitlines() if x.startswith(kind + ":"))
        assert line.endswith(", 0 false") and not line.startswith(f"{kind}: 0 "), out


def _tampered(report, change) -> dict:
    copy = json.loads(json.dumps(report))
    change(copy["divergences"])
    return copy


def _named(divergences):
    d = next(d for d in divergences if d["diagnosis"]["variants"])
    d["diagnosis"]["variants"][0]["name"] = "max-second-on-zeros"


def _bits(divergences):
    d = next(d for d in divergences if d["elements"])
    d["elements"][0]["actual_bits"] = "0x3f800000"


def _located(divergences):
    d = next(d for d in divergences if d["location"].get("kind") == "value")
    d["location"]["line"] = min(s for s in d["highlight"] if s != d["location"]["line"]) \
        if len(d["highlight"]) > 1 else 1


@pytest.mark.parametrize(("kind", "change"), [("named", _named), ("reproduced", _bits),
                                              ("located", _located)])
def test_a_false_claim_is_found_false(report, tmp_path, kind, change):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_tampered(report, change)))
    status, out = recheck(path)
    assert status == 1, out
    line = next(x for x in out.splitlines() if x.startswith(kind + ":"))
    assert not line.endswith(", 0 false"), out
    assert "\n  false: divergence " in out, out


def test_nothing_to_re_check_is_a_usage_error(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"divergences": []}))
    status, out = recheck(empty)
    assert status == 2 and "no claim to re-check" in out, out
    for text, said in (("{", "Expecting"), ("[]", "not a report"),
                       ('{"divergences": 3}', "no list of divergences")):
        empty.write_text(text)
        status, out = recheck(empty)
        assert status == 2 and said in out and "Traceback" not in out, out
    status, out = recheck(tmp_path / "missing.json")
    assert status == 2 and "No such file" in out and "Traceback" not in out, out


def test_a_case_file_divergence_reads_back_from_its_inputs_bits():
    """The record's inputs are read from their bits: a NaN's payload and -0.0 survive."""
    from gradient_conformance.conformance.commands.recheck import _buffers
    buffers = _buffers([{"slot": 0, "dtype": "f32", "shape": [2],
                         "bits": ["0x7fc0dead", "0x80000000"]},
                        {"slot": 1, "dtype": "i32", "shape": [], "bits": ["-3"]}])
    assert buffers[0].view("uint32").tolist() == [0x7FC0DEAD, 0x80000000]
    assert buffers[1].item() == -3


def test_a_crash_s_location_is_probed_again(tmp_path):
    """A crash located where it starts (the prefix bisection) holds when re-checked; moved
    to a line before it, it is found false."""
    impl = str(ROOT / "tests" / "impls" / "crashes_at_reduce.py")
    path = tmp_path / "run.json"
    status, out, _ = suite(impl, "-k", "test_case_file and reduce_fold_left",
                           f"--report-json={path}")
    assert status == 1, out
    report = json.loads(path.read_text())
    [d] = [d for d in report["divergences"] if d["location"].get("kind") == "crash"]
    status, out = recheck(path, impl)
    assert status == 0 and "located: 1 claims re-checked, 0 false" in out, out
    lines = d["source"].splitlines()
    d["location"]["line"] = next(k for k, text in enumerate(lines, start=1)
                                 if text.startswith("%x = load"))
    d["location"]["op"] = "load"
    path.write_text(json.dumps(report))
    status, out = recheck(path, impl)
    assert status == 1 and "located: 1 claims re-checked, 1 false" in out, out
