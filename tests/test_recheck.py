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

import numpy as np
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


def test_nothing_to_re_check_is_a_usage_error(report, tmp_path):
    empty = tmp_path / "empty.json"
    of = {"implementation": report["implementation"]}
    empty.write_text(json.dumps({"divergences": []} | of))
    status, out = recheck(empty)
    assert status == 2 and "no claim to re-check" in out, out
    for text, said in (("{", "Expecting"), ("[]", "not a report"),
                       (json.dumps({"divergences": 3} | of), "no list of divergences"),
                       (json.dumps({"divergences": []}), "which implementation it is of")):
        empty.write_text(text)
        status, out = recheck(empty)
        assert status == 2 and said in out and "Traceback" not in out, out
    status, out = recheck(tmp_path / "missing.json")
    assert status == 2 and "No such file" in out and "Traceback" not in out, out


def test_a_report_is_re_checked_only_against_the_implementation_it_is_of(report, tmp_path):
    """Re-checked against another implementation, or another version of it (tinygrad on
    another device), a report's claims would be found false for no fault of the run's: a
    usage error naming both, and nothing re-checked."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(report))
    status, out = recheck(path, impl="reference")
    assert status == 2 and "Traceback" not in out, out
    assert f"the report is of '{report['implementation']['name']} " in out, out
    assert "--impl loads 'reference" in out and "claims re-checked" not in out, out
    changed = json.loads(json.dumps(report))
    changed["implementation"]["version"] = "0.14.0 on CPU"
    path.write_text(json.dumps(changed))
    status, out = recheck(path)
    assert status == 2 and "0.14.0 on CPU" in out and "claims re-checked" not in out, out


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


STALE = '''"""The reference, but the first element of slot 1 is what the program run before it left
there: the length of its text (0.0 first thing in a process), as a system that reads memory
it did not write gives (tinygrad's shift by 33, issue 53's matrix)."""
import numpy as np

from gradient_conformance import reference

_seen = {"current": None, "before": None}


def build(source):
    run = reference.build(source)
    if source != _seen["current"]:
        _seen["before"], _seen["current"] = _seen["current"], source

    def stale(buffers):
        out = run(buffers)
        out[1].ravel()[0] = np.float32(len(_seen["before"] or ""))
        return out
    return stale
'''
PROGRAM = ("%a = buffer slot=0 dtype=f32 shape=[]\n%o = buffer slot=1 dtype=f32 shape=[]\n"
           "%x = load %a\n%y = mul %x 3.0\nstore %o %y\n")


def test_an_answer_that_depends_on_what_ran_before_is_asked_first_thing_in_a_new_process(
        tmp_path):
    """A divergence whose value the implementation gives first thing in a process, and
    otherwise after another program: the re-check, after that other program, asks a new
    process, which gives the report's bits, so the claim holds and says how; bits that
    neither process gives, where the two differ, are left out as depending on history,
    neither held nor found false."""
    from gradient_conformance.conformance.commands.recheck import recheck as recheck_report
    from gradient_conformance.conformance.transports.loading import load
    module = tmp_path / "stale.py"
    module.write_text(STALE)
    divergence = {
        "source": PROGRAM, "expected_status": "ok", "actual_status": "ok",
        "inputs": [{"slot": 0, "dtype": "f32", "shape": [], "bits": ["0x3f800000"]},
                   {"slot": 1, "dtype": "f32", "shape": [], "bits": ["0x00000000"]}],
        "elements": [{"slot": 1, "index": 0, "expected_bits": "0x40400000",
                      "actual_bits": "0x00000000"}], "diagnosis": {}, "location": {}}
    impl = load(str(module))
    try:
        impl.run_case("%a = buffer slot=0 dtype=f32 shape=[]\n", {0: np.zeros((), "f4")},
                      {0: ("f32", ())})  # another program first: 40 characters of text
        found = recheck_report(impl, {"divergences": [divergence]},
                               fresh=lambda: load(str(module)))
        assert found.held["reproduced"] == 1 and found.first_thing == 1, found.lines()
        assert "only first thing in a new process" in "\n".join(found.lines())
        divergence["elements"][0]["actual_bits"] = "0x40a00000"  # 5.0: no process gives it
        found = recheck_report(impl, {"divergences": [divergence]},
                               fresh=lambda: load(str(module)))
        assert not found.false and found.checked == 0, found.lines()
        assert any("depends on what it ran before" in why for why in found.left_out)
    finally:
        impl.close()


def test_an_answer_the_same_in_both_processes_is_asked_after_the_report_s_other_programs(
        tmp_path):
    """A run's answer came after thousands of programs: a divergence whose value both the
    re-check's process and a new one give otherwise (here: nothing ran before it in either)
    is asked in the new process after the report's other programs. After one of them it gives
    the report's bits: the claim holds, and says how; it gives other bits there, and never
    the report's: left out as depending on history; the same bits after every one (a steady
    implementation, the reference): false. A failure of the run's (a timeout under load) that
    does not recur is left out too."""
    from gradient_conformance.conformance.commands.recheck import recheck as recheck_report
    from gradient_conformance.conformance.transports.loading import load
    module = tmp_path / "stale.py"
    module.write_text(STALE)
    steady = tmp_path / "steady.py"
    steady.write_text("from gradient_conformance.reference import build  # noqa: F401\n")
    earlier = ("%a = buffer slot=0 dtype=f32 shape=[]\n%o = buffer slot=1 dtype=f32 "
               "shape=[]\nstore %o 1.0\n")

    def divergence(source: str, bits: str) -> dict:
        return {"source": source, "expected_status": "ok", "actual_status": "ok",
                "inputs": [{"slot": 0, "dtype": "f32", "shape": [], "bits": ["0x3f800000"]},
                           {"slot": 1, "dtype": "f32", "shape": [], "bits": ["0x00000000"]}],
                "elements": [{"slot": 1, "index": 0, "expected_bits": "0x40400000",
                              "actual_bits": bits}], "diagnosis": {}, "location": {}}

    def rechecked(bits: str, before: str, module=module):
        impl = load(str(module))
        try:
            return recheck_report(impl, {"divergences": [divergence(PROGRAM, bits),
                                                         divergence(before, "0x00000000")]},
                                  fresh=lambda: load(str(module)))
        finally:
            impl.close()
    after_earlier = f"{np.float32(len(earlier)).view(np.uint32):#010x}"
    found = rechecked(after_earlier, earlier)
    assert found.held["reproduced"] >= 1 and found.after_another == 1, found.lines()
    assert "only in a new process after another of the report's programs" in \
        "\n".join(found.lines())
    found = rechecked("0x40a00000", earlier)  # 5.0: after no program of the report
    assert not found.false and found.after_another == 0, found.lines()
    assert any("depends on what it ran before" in why for why in found.left_out)
    found = rechecked(after_earlier, earlier, steady)
    assert found.false.get("reproduced") and found.after_another == 0, found.lines()
    impl = load(str(steady))  # a timeout of the run's, which the re-check does not meet
    try:
        timed_out = divergence(PROGRAM, "") | {"actual_status": "failure", "elements": []}
        found = recheck_report(impl, {"divergences": [timed_out]},
                               fresh=lambda: load(str(steady)))
    finally:
        impl.close()
    assert not found.false and found.checked == 0, found.lines()
    assert any("does not meet again" in why for why in found.left_out), found.lines()
