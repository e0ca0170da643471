"""Grading a class (issue 56; docs/grading.md): a synthetic class graded as a teaching
assistant grades one, its scores checked against the rubric, its results against
Gradescope's documented fields, its class page against the faults the class was built from,
and a re-run, another --jobs and a hostile classmate against the first run."""

from __future__ import annotations

import csv
import io
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from gradient_conformance.conformance.commands.checks import areas as check_areas
from gradient_conformance.reports.grading import (
    VISIBILITIES,
    Area,
    Rubric,
    default_rubric,
    load_rubric,
    scores,
)
from gradient_conformance.reports.records import Report
from tests.conftest import ROOT

IMPLS = ROOT / "tests" / "impls"
# Enough of the suite to tell the class's faults apart, in seconds a submission: the tape
# case files, the enumerated fan-in of three shares (where a depth-first walk departs) and
# the rules at a derivative of zero (where an entry that passes nothing on departs).
SELECT = ("-k", "tape_case_file or tape_at_every and (fan and 3 or zero)")


def _student(folder: pathlib.Path, fault: str) -> None:
    """A submission folder: the student's tape code (tape_student.py) and its module."""
    folder.mkdir()
    shutil.copy(IMPLS / "tape_student.py", folder)
    (folder / "impl.py").write_text(
        "from tape_student import backprop_with\n\nNAME = 'student'\n\n\n"
        f"def backprop(tape):\n    return backprop_with(tape, {fault!r})\n")


HOSTILE = '''"""Tries to reach a classmate's results and the grader's files; leaves a process."""
import os
import pathlib
import subprocess

from gradient_conformance.reference.tape import backprop as _right

NAME = "hostile"


def backprop(tape):
    for path in [pathlib.Path(os.environ.get("GRADE_MARK", "/tmp/grade-hostile-mark")),
                 *pathlib.Path("/").glob("*/*/submissions/*/results.json"),
                 *pathlib.Path("/tmp").glob("**/results.json")]:
        try:
            path.write_text('{"score": 1000}')
        except OSError:
            pass
    subprocess.Popen(["sleep", "299.5"])
    return _right(tape)
'''


def _class(folder: pathlib.Path) -> pathlib.Path:
    """Five submissions: the reference's backprop, two students walking depth-first, one
    whose entries of derivative zero pass nothing on, and one that crashes."""
    folder.mkdir()
    (folder / "perfect.py").write_text(
        "from gradient_conformance.reference.tape import backprop  # noqa: F401\n")
    _student(folder / "alice", "depth_first")
    _student(folder / "bob", "depth_first")
    _student(folder / "carol", "zero_passes_nothing")
    (folder / "dave.py").write_text("def backprop(tape):\n    raise KeyError('todo')\n")
    return folder


def _grade(submissions: pathlib.Path, out: pathlib.Path, *args: str):
    return subprocess.run([sys.executable, "-m", "gradient_conformance", "grade",
                           str(submissions), "--out", str(out), "--module", "impl",
                           "--max-examples", "5", *SELECT, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)


def valid_gradescope_results(data) -> list[str]:
    """What in `data` breaks Gradescope's documented results.json (its autograder
    specification): a number `score` (or per-test scores), `execution_time` a number,
    `output` a string, `visibility` one of its four, and `tests` a list of objects with a
    string `name`, numbers `score` and `max_score`, a string `output`, a `visibility` and a
    list of string `tags`."""
    wrong = []
    number = (int, float)
    if not isinstance(data.get("score"), number) or isinstance(data.get("score"), bool):
        wrong.append("score")
    for key, kind in (("execution_time", number), ("output", str), ("tests", list)):
        if key in data and not isinstance(data[key], kind):
            wrong.append(key)
    for key in ("visibility", "stdout_visibility"):
        if key in data and data[key] not in VISIBILITIES:
            wrong.append(key)
    for k, test in enumerate(data.get("tests", [])):
        if not isinstance(test.get("name"), str):
            wrong.append(f"tests[{k}].name")
        for key in ("score", "max_score"):
            if not isinstance(test.get(key), number) or isinstance(test.get(key), bool):
                wrong.append(f"tests[{k}].{key}")
        if not isinstance(test.get("output", ""), str):
            wrong.append(f"tests[{k}].output")
        if test.get("visibility", "visible") not in VISIBILITIES:
            wrong.append(f"tests[{k}].visibility")
        if not all(isinstance(t, str) for t in test.get("tags", [])):
            wrong.append(f"tests[{k}].tags")
    return wrong


def test_every_check_belongs_to_an_area_its_docstring_names():
    areas = check_areas()
    assert areas["test_tape_at_every_class_and_fan_in"] == "Tapes"
    assert areas["test_identity_in_every_spelling"] == "Hash consing"
    assert areas["test_every_rejection_in_every_disguise"] == "When gradient is rejected"
    assert areas["test_case_file"] == areas["test_semantics"] == "Case files"
    spec = (ROOT / "SPEC.md").read_text()
    for check, area in areas.items():
        assert area == "Case files" or f"## {area}" in spec or f"**{area}.**" in spec, check


def test_a_rubric_says_what_is_wrong_with_it():
    checks = {"test_a": "Tapes", "test_b": "The walk"}
    rubric = load_rubric('[area."Tapes"]\npoints = 30\n[area."The walk"]\npoints = 10\n'
                         'visibility = "hidden"\n', "r.toml", checks)
    assert [(a.name, a.points, a.visibility) for a in rubric.areas] == [
        ("Tapes", 30.0, "visible"), ("The walk", 10.0, "hidden")]
    for text, said in (('[area."Walk"]\npoints = 1\n', 'no check belongs to it; the areas '
                        'are: Tapes, The walk'),
                       ('[area."Tapes"]\npoints = -1\n', "give a number, 0 or more"),
                       ('[area."Tapes"]\npoints = 1\nvisibility = "soon"\n', "one of hidden"),
                       ('[area."Tapes"]\npoints = 1\nweight = 2\n', "only points and"),
                       ('[area."Tapes"\npoints = 1\n', "not TOML"),
                       ('title = "x"\n', "found title")):
        with pytest.raises(ValueError, match=r"r\.toml") as raised:
            load_rubric(text, "r.toml", checks)
        assert said in str(raised.value), str(raised.value)
    assert [a.name for a in default_rubric(checks).areas] == ["Tapes", "The walk"]


def test_an_area_earns_its_points_times_the_share_of_its_tests_passed():
    rubric = Rubric((Area("Tapes", 20.0), Area("The walk", 10.0)),
                    {"test_a": "Tapes", "test_b": "Tapes", "test_c": "The walk"})
    report = Report(implementation={}, checks={"test_a": {"passed": 3, "failed": 1},
                                               "test_b": {"passed": 2, "skipped": 2}})
    found = scores(report, rubric)
    assert [(s.score, s.passed, s.failed, s.skipped) for s in found] == [
        (12.5, 5, 1, 2), (0.0, 0, 0, 0)]  # 20 * 5/8; the walk: nothing ran, no credit
    assert [s.score for s in scores(None, rubric)] == [0.0, 0.0]
    # On the class page, an area none of whose tests ran (-k left them out) says so, not
    # "0 of 1 passed every test".
    from gradient_conformance.reports.grading import class_page
    page = class_page([("a", found)], {"a": (report, "")}, rubric, about="")
    assert "<td>Tapes</td><td class='n'>20</td><td class='n'>0 of 1</td>" in page
    assert "<td>The walk</td><td class='n'>10</td><td class='n'>none of its tests ran</td>" \
        in page


def test_variants_the_programs_did_not_tell_apart_are_one_cause_not_several():
    """docs/grading.md, "What is written": a divergence that several variants reproduce,
    the programs run not telling them apart, counts once, as the cause naming them all; a
    variant named alone elsewhere in the same run is that run's cause."""
    from gradient_conformance.reports.grading import causes
    from gradient_conformance.reports.records import Divergence

    def run(*diagnoses):
        return Report(implementation={}, divergences=[
            Divergence("c", "c", "s", diagnosis={"variants": [
                {"name": n, "says": n.upper()} for n in names]}) for names in diagnoses]), ""
    found = causes({"a": run(["x", "y"]), "b": run(["x", "y"], ["x"]), "c": run(["y"]),
                    "d": run(["x", "y"], ["z"])})
    assert [(c.name, c.submissions) for c in found] == [
        ("x or y", ["a", "d"]), ("x", ["b"]), ("y", ["c"]), ("z", ["d"])]
    assert found[0].says == "X; or Y (the programs run did not tell them apart)"


def test_a_class_is_graded_fairly_as_the_rubric_says(tmp_path):
    """Issue 56, "Tests": every score is the rubric's of its checks, the results validate
    against Gradescope's fields, the class page names each fault the class was built from
    with its count, and a re-run at another --jobs gives the same results."""
    submissions = _class(tmp_path / "class")
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('[area."Tapes"]\npoints = 40\n[area."Case files"]\npoints = 0\n')
    first = _grade(submissions, tmp_path / "out1", "--jobs", "2", "--rubric", str(rubric))
    assert first.returncode == 0, first.stderr[-3000:]
    assert "graded 5 submissions" in first.stdout
    book = list(csv.DictReader(io.StringIO((tmp_path / "out1" / "scores.csv").read_text())))
    assert [row["submission"] for row in book] == ["alice", "bob", "carol", "dave", "perfect"]
    for row in book:
        report = json.loads((tmp_path / "out1" / "submissions" / row["submission"] /
                             "report.json").read_text())
        counts = [n for c, n in report["checks"].items() if c.startswith("test_tape")]
        passed = sum(n.get("passed", 0) for n in counts)
        ran = sum(sum(n.values()) for n in counts)
        assert float(row["Tapes"]) == pytest.approx(40 * passed / ran, abs=1e-3), row
        results = json.loads((tmp_path / "out1" / "submissions" / row["submission"] /
                              "results.json").read_text())
        assert valid_gradescope_results(results) == [], results
        assert results["score"] == pytest.approx(float(row["score"]))
    scored = {row["submission"]: float(row["score"]) for row in book}
    assert scored["perfect"] == 40 and scored["dave"] == 0
    assert 0 < scored["alice"] == scored["bob"] < 40 and 0 < scored["carol"] < 40
    page = (tmp_path / "out1" / "class.html").read_text()
    assert "[<code>tape-depth-first</code>]: 2 of 5" in page
    assert "[<code>tape-zero-passes-nothing</code>]: 1 of 5" in page
    assert "crashes with KeyError: 1 of 5" in page
    assert "alice" not in page and "s1, s2" in page  # anonymous ids by default
    # The re-run, at --jobs 1, of three of the five (one of each kind: a fault, a crash, a
    # pass; fewer, for the first tier's time): the same rows and the same results.
    for who in ("alice", "carol"):
        shutil.rmtree(submissions / who)
    second = _grade(submissions, tmp_path / "out2", "--jobs", "1", "--rubric", str(rubric))
    assert second.returncode == 0, second.stderr[-3000:]
    rows = (tmp_path / "out1" / "scores.csv").read_text().splitlines()
    assert (tmp_path / "out2" / "scores.csv").read_text().splitlines() == \
        [row for row in rows if not row.startswith(("alice,", "carol,"))]
    for who in ("bob", "dave", "perfect"):
        a, b = (json.loads((tmp_path / out / "submissions" / who / "results.json").read_text())
                for out in ("out1", "out2"))
        a.pop("execution_time"), b.pop("execution_time")
        assert a == b, who


def test_a_hostile_submission_changes_nothing_of_another_s(tmp_path):
    """A classmate that writes wherever it can and leaves a process: its own run is
    contained, and every other submission's results are what they are without it."""
    submissions = _class(tmp_path / "class")
    for who in ("bob", "carol"):  # three classmates are enough to be harmed, and quicker
        shutil.rmtree(submissions / who)
    alone = _grade(submissions, tmp_path / "out-alone")
    assert alone.returncode == 0, alone.stderr[-3000:]
    mark = tmp_path / "mark"
    (submissions / "eve.py").write_text(HOSTILE.replace("/tmp/grade-hostile-mark", str(mark)))
    graded = _grade(submissions, tmp_path / "out-with", "--jobs", "2")
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert not mark.exists()
    left = subprocess.run(["pgrep", "-f", "sleep 299.5"], capture_output=True, text=True)
    assert left.stdout == "", "the hostile submission's process outlived its run"
    for who in ("alice", "dave", "perfect"):
        a, b = (json.loads((tmp_path / out / "submissions" / who / "results.json").read_text())
                for out in ("out-alone", "out-with"))
        a.pop("execution_time"), b.pop("execution_time")
        assert a == b, who
    eve = json.loads((tmp_path / "out-with" / "submissions" / "eve" / "results.json")
                     .read_text())
    assert valid_gradescope_results(eve) == [] and eve["score"] <= 100


def test_a_submission_folder_it_cannot_read_is_a_clear_error(tmp_path):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "two").mkdir()
    for name in ("a.py", "b.py"):
        (tmp_path / "class" / "two" / name).write_text("")
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "grade",
                          str(tmp_path / "class"), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "2 .py files at its top level (a.py, b.py): name the implementation's module " \
        "with --module" in run.stderr


@pytest.mark.slow
def test_a_class_graded_on_a_dask_cluster_scores_as_on_this_machine(tmp_path):
    """Issue 56: the submissions as tasks on a local Dask cluster of two workers (a real
    scheduler and workers, as Dask documents them) give the scores --jobs gives."""
    pytest.importorskip("distributed", reason="the [cluster] extra (make test installs it)")
    from benchmarks.cluster_rate import local_cluster
    submissions = _class(tmp_path / "class")
    here = _grade(submissions, tmp_path / "here", "--jobs", "2")
    assert here.returncode == 0, here.stderr[-3000:]
    (tmp_path / "logs").mkdir()
    with local_cluster(tmp_path / "logs", 2) as (address, _):
        there = _grade(submissions, tmp_path / "there", "--scheduler", address)
    assert there.returncode == 0, there.stderr[-3000:]
    assert (tmp_path / "there" / "scores.csv").read_text() == \
        (tmp_path / "here" / "scores.csv").read_text()
    assert json.loads((tmp_path / "there" / "grade.json").read_text())["scheduler"] == address
