"""Grading a class (issue 56; docs/grading.md): a synthetic class graded as a teaching
assistant grades one, its scores checked against the rubric, its results against
Gradescope's documented fields, its class page against the faults the class was built from,
and a re-run, another --jobs and a hostile classmate against the first run."""

from __future__ import annotations

import csv
import io
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from gradient_conformance.conformance.areas import areas as check_areas
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
from tests.test_reports import _browse, _chromium

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


# The keys Gradescope's autograder specification documents ("Output format"), top-level and
# per test: any other is not Gradescope's.
GRADESCOPE_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format",
                   "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests",
                   "leaderboard"}
GRADESCOPE_TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number",
                        "output", "output_format", "tags", "visibility", "extra_data"}


def valid_gradescope_results(data) -> list[str]:
    """What in `data` breaks Gradescope's documented results.json (its autograder
    specification): only its keys; a number `score` (or per-test scores), `execution_time` a
    number, `output` a string, `visibility` one of its four, and `tests` a list of objects
    with a string `name`, numbers `score` and `max_score` (the score no more than the
    maximum), `status` passed or failed, a string `output`, a `visibility` and a list of
    string `tags`."""
    wrong = sorted(set(data) - GRADESCOPE_KEYS)
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
        wrong += [f"tests[{k}].{key}" for key in sorted(set(test) - GRADESCOPE_TEST_KEYS)]
        if not isinstance(test.get("name"), str):
            wrong.append(f"tests[{k}].name")
        if test.get("status", "passed") not in ("passed", "failed"):
            wrong.append(f"tests[{k}].status")
        if isinstance(test.get("score"), number) and isinstance(test.get("max_score"), number) \
                and test["score"] > test["max_score"]:
            wrong.append(f"tests[{k}].score > max_score")
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


def _tests_of_every_check() -> list[tuple[str, dict]]:
    """(check, its parameters) for every test the suite's checks parametrize: read from
    their own pytest marks, as collection makes them."""
    import importlib
    import itertools

    from gradient_conformance.conformance.areas import CHECKS
    found = []
    for path in sorted(CHECKS.glob("test_*.py")):
        module = importlib.import_module(f"gradient_conformance.conformance.checks.{path.stem}")
        for name in dir(module):
            function = getattr(module, name)
            if not name.startswith("test_") or not callable(function):
                continue
            grids = []
            for mark in getattr(function, "pytestmark", []):
                if mark.name == "parametrize":
                    names, values = mark.args[0], mark.args[1]
                    names = [n.strip() for n in names.split(",")] if isinstance(names, str) \
                        else list(names)
                    grids.append([dict(zip(names, v if len(names) > 1 else (v,), strict=True))
                                  for v in values])
            for combination in itertools.product(*grids):
                found.append((name, {k: v for part in combination for k, v in part.items()}))
    return found


def test_each_area_of_the_issue_has_tests_and_every_area_some():
    """Issue 56's areas, in the spec's terms: text, hash consing, forward arithmetic, each
    rule group, the walk's order, detach, rejection, loops and calls, tapes. Each test's
    area comes from its check's docstring, its topic or its rule's row (areas.area_of), and
    every area the rubric may name is the area of some test (none that nothing can earn)."""
    from gradient_conformance.conformance.areas import (
        area_names,
        area_of,
        topic_areas,
    )
    from gradient_conformance.reference.rules import RULE_GROUPS
    checks, topics = check_areas(), topic_areas()
    tests = _tests_of_every_check()
    reached: dict[str, int] = {}
    for check, params in tests:
        area = area_of(check, params, checks, topics)
        reached[area] = reached.get(area, 0) + 1
    assert sorted(reached) == area_names(), (sorted(reached), area_names())
    for area in ("Text form", "Hash consing", "Values and arithmetic", "The walk", "Detach",
                 "When gradient is rejected", "Loops and calls", "Tapes",
                 *(f"The rules: {group}" for group in RULE_GROUPS)):
        assert reached.get(area, 0) > 0, area
    assert area_of("test_rule_at_every_value_class", {"name": "mul/second"}, checks,
                   topics) == "The rules: arithmetic"
    assert area_of("test_rules_over_every_axis_set", {"op": "reduce-max"}, checks,
                   topics) == "The rules: reduce and movement"
    assert area_of("test_semantics", {"topic": "detach", "name": "gradient/x.ir"}, checks,
                   topics) == "Detach"
    assert area_of("test_case_file", {"path": "x"}, checks, topics) == "Case files"
    # Every row enumerated by value is in one group; the others pass g whatever the values.
    from gradient_conformance.generators.enumerations import enumerated_ops
    grouped = [row for rows in RULE_GROUPS.values() for row in rows]
    assert len(grouped) == len(set(grouped)) and set(enumerated_ops()) <= set(grouped)


def test_a_rubric_says_what_is_wrong_with_it():
    known = ["Tapes", "The walk"]
    rubric = load_rubric('[area."Tapes"]\npoints = 30\n[area."The walk"]\npoints = 10\n'
                         'visibility = "hidden"\n', "r.toml", known)
    assert [(a.name, a.points, a.visibility) for a in rubric.areas] == [
        ("Tapes", 30.0, "visible"), ("The walk", 10.0, "hidden")]
    for text, said in (('[area."Walk"]\npoints = 1\n', 'no test counts in it; the areas '
                        'are: Tapes, The walk'),
                       ('[area."Tapes"]\npoints = -1\n', "give a number, 0 or more"),
                       ('[area."Tapes"]\npoints = 1\nvisibility = "soon"\n', "one of hidden"),
                       ('[area."Tapes"]\npoints = 1\nweight = 2\n', "only points and"),
                       ('[area."Tapes"\npoints = 1\n', "not TOML"),
                       ('title = "x"\n', "found title")):
        with pytest.raises(ValueError, match=r"r\.toml") as raised:
            load_rubric(text, "r.toml", known)
        assert said in str(raised.value), str(raised.value)
    assert [a.name for a in default_rubric(known).areas] == ["Tapes", "The walk"]
    assert default_rubric(known).left_out == [] and load_rubric(
        '[area."Tapes"]\npoints = 3\n', "r.toml", known).left_out == ["The walk"]


def test_an_area_earns_its_points_times_the_share_of_its_tests_passed():
    from gradient_conformance.reports.records import Divergence
    rubric = Rubric((Area("Tapes", 20.0), Area("The walk", 10.0), Area("Detach", 5.0)),
                    ("Detach", "Tapes", "The walk"))
    first = Divergence("test_semantics", "test_semantics[detach-x.ir]", "wrong", area="Detach")
    report = Report(implementation={}, areas={"Tapes": {"passed": 5, "failed": 1,
                                                        "skipped": 2},
                                              "Detach": {"passed": 1, "failed": 1}},
                    divergences=[first])
    found = scores(report, rubric)
    assert [(s.score, s.passed, s.failed, s.skipped) for s in found] == [
        (12.5, 5, 1, 2), (0.0, 0, 0, 0), (2.5, 1, 1, 0)]  # 20 * 5/8; the walk: nothing ran
    assert [s.first for s in found] == [None, None, first]  # by the area of its test
    assert [s.score for s in scores(None, rubric)] == [0.0, 0.0, 0.0]
    # On the class page, an area none of whose tests ran (-k left them out) says so, not
    # "0 of 1 passed every test".
    from gradient_conformance.reports.grading import class_page
    page = class_page([("a", found)], {"a": (report, "")}, rubric, about="")
    assert "<td>Tapes</td><td class='n'>20</td><td class='n'>0 of 1</td>" in page
    assert "<td>The walk</td><td class='n'>10</td><td class='n'>none of its tests ran</td>" \
        in page


def test_a_report_whose_counts_are_not_counts_is_refused():
    """Grading adds up a report's counts, read back as data: each area's and each check's
    outcomes must be whole counts, 0 or more; the area a divergence carries must be text."""
    from gradient_conformance.reports.records import Divergence, from_json, to_json
    good = Report(implementation={"name": "x"}, areas={"Tapes": {"passed": 2}},
                  divergences=[Divergence("c", "c[x]", "s", area="Detach")])
    assert from_json(to_json(good)) == good
    for field, value in (("areas", {"Tapes": {"passed": "2"}}), ("areas", {"Tapes": 2}),
                         ("checks", {"c": {"failed": -1}}), ("checks", {"c": {"passed": True}})):
        data = json.loads(to_json(good))
        data[field] = value
        with pytest.raises(ValueError, match=f"'{field}' are not outcome -> count"):
            from_json(json.dumps(data))
    data = json.loads(to_json(good))
    data["divergences"][0]["area"] = 3
    with pytest.raises(ValueError, match="'area'"):
        from_json(json.dumps(data))


def test_anonymous_ids_are_dealt_in_an_order_no_class_list_undoes():
    """docs/grading.md, "What is written": s01, s02, ... in an order drawn from a key, the
    same for the same key, another for another, and not the names' order."""
    from gradient_conformance.reports.grading import anonymous
    names = [f"student{k:02d}" for k in range(20)]
    dealt = anonymous(names, "one key")
    assert sorted(dealt.values()) == [f"s{k:02d}" for k in range(1, 21)]
    assert anonymous(names, "one key") == dealt != anonymous(names, "another key")
    assert [dealt[n] for n in names] != sorted(dealt.values())  # not the names' order
    assert anonymous(names) == {n: f"s{k:02d}" for k, n in enumerate(names, start=1)}


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
    assert f"the rubric {rubric} gives no points to the areas Detach, Hash consing, " \
        "Loops and calls, Operations, Text form, The rules, The rules: arithmetic" in \
        first.stderr, first.stderr[-2000:]
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
    assert "alice" not in page and re.search(r"<p>s\d, s\d</p>", page)  # anonymous ids
    # In an order no class list undoes, kept for the staff in grade.json.
    ids = json.loads((tmp_path / "out1" / "grade.json").read_text())["anonymous"]
    assert sorted(ids) == ["alice", "bob", "carol", "dave", "perfect"]
    assert sorted(ids.values()) == ["s1", "s2", "s3", "s4", "s5"]
    listed = re.findall(r"<tr><td>(s\d)</td>", page)
    assert listed == sorted(listed) == sorted(ids.values())
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
    (submissions / "mallory.py").write_text("def backprop(tape)\n")  # not Python: no load
    graded = _grade(submissions, tmp_path / "out-with", "--jobs", "2")
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert not mark.exists()
    # The page is anonymous also where a problem quotes the submission's file: it shows the
    # problem's kind alone (grade.json, for the staff, has it whole).
    problem = json.loads((tmp_path / "out-with" / "grade.json").read_text())[
        "submissions"]["mallory"]["problem"]
    assert problem.startswith("exit status 2: ") and "mallory.py" in problem, problem
    page = (tmp_path / "out-with" / "class.html").read_text()
    assert "mallory" not in page
    assert "the run ended without a report (exit status 2): 1 of 5" in page
    left = subprocess.run(["pgrep", "-f", "sleep 299.5"], capture_output=True, text=True)
    assert left.stdout == "", "the hostile submission's process outlived its run"
    for who in ("alice", "dave", "perfect"):
        a, b = (json.loads((tmp_path / out / "submissions" / who / "results.json").read_text())
                for out in ("out-alone", "out-with"))
        a.pop("execution_time"), b.pop("execution_time")
        assert a == b, who
    eve = json.loads((tmp_path / "out-with" / "submissions" / "eve" / "results.json")
                     .read_text())
    assert valid_gradescope_results(eve) == []


def test_a_submission_it_cannot_read_stops_no_other_s(tmp_path):
    """A folder whose implementation cannot be told is graded 0 and says why; an entry whose
    name is no id is left out, saying so; a class with nothing to grade is a usage error."""
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "two").mkdir()
    for name in ("a.py", "b.py"):
        (tmp_path / "class" / "two" / name).write_text("")
    (tmp_path / "class" / "José García").mkdir()  # an id in any script, spaces within
    (tmp_path / "class" / "loop").mkdir()
    (tmp_path / "class" / "loop" / "impl.py").symlink_to("impl.py")  # a link to itself
    (tmp_path / "class" / "no (id).py").write_text("")
    (tmp_path / "class" / "two.py").write_text("")  # the id of the folder `two` too
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "grade",
                          str(tmp_path / "class"), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert "graded 3 submissions" in run.stdout and "2 left out" in run.stdout
    assert "'no (id).py' left out: not a submission id" in run.stderr
    assert "'two.py' left out: another entry has the id 'two' too: rename one" in run.stderr
    for ident, problem in (("two", "no implementation to load: 2 .py files at its top level "
                            "(a.py, b.py): name the implementation's module with --module"),
                           ("José García", "no implementation to load: 0 .py files at its "
                            "top level"),
                           ("loop", "no implementation to load: ")):
        results = json.loads((tmp_path / "out" / "submissions" / ident / "results.json")
                             .read_text())
        assert valid_gradescope_results(results) == [] and results["score"] == 0
        assert results["output"].startswith(problem), results["output"]
    ran = json.loads((tmp_path / "out" / "grade.json").read_text())
    assert list(ran["left_out"]) == ["no (id).py", "two.py"]
    for ident in ("two", "José García", "loop"):
        shutil.rmtree(tmp_path / "class" / ident)
    (tmp_path / "class" / "two.py").unlink()
    again = subprocess.run([sys.executable, "-m", "gradient_conformance", "grade",
                            str(tmp_path / "class"), "--out", str(tmp_path / "out2")],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "no submission in it (a .py file or a folder each); 'no (id).py': not a " \
        "submission id" in again.stderr


def test_a_manifest_of_programs_is_graded_by_area_and_names_them_when_asked(tmp_path):
    """docs/grading.md, "Submissions": a TOML manifest of a `cmd:` program (the fast
    implementation served over the protocol, as a program in another language is) and a
    path relative to the manifest (the recip-form fault), graded on two areas of a rubric,
    one of them hidden: each area's score is its points times the share of its tests passed,
    its visibility is the rubric's, and --names puts the names and the reports' links on
    the page."""
    (tmp_path / "ben.py").write_text(
        "from gradient_conformance.implementations.faults import seeded\n"
        "build, NAME, VERSION, CAPABILITIES = seeded('recip_form')\n")
    (tmp_path / "class.toml").write_text(
        "[submissions]\n"
        f"ann = \"cmd:{sys.executable} -m gradient_conformance serve "
        "gradient_conformance.implementations.fast\"\n"
        "ben = \"ben.py\"\n")
    (tmp_path / "rubric.toml").write_text(
        '[area."Case files"]\npoints = 10\n[area."Detach"]\npoints = 5\n'
        'visibility = "hidden"\n')
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "grade",
                          str(tmp_path / "class.toml"), "--out", str(tmp_path / "out"),
                          "--rubric", str(tmp_path / "rubric.toml"), "--names", "--jobs", "2",
                          "-k", "test_case_file and (recip or detach) or test_semantics and "
                          "detach"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    book = {row["submission"]: row for row in csv.DictReader(io.StringIO(
        (tmp_path / "out" / "scores.csv").read_text()))}
    assert set(book) == {"ann", "ben"}
    for ident, row in book.items():
        report = json.loads((tmp_path / "out" / "submissions" / ident / "report.json")
                            .read_text())
        for area, points in (("Case files", 10), ("Detach", 5)):
            counts = report["areas"][area]
            share = counts.get("passed", 0) / sum(counts.values())
            assert float(row[area]) == pytest.approx(points * share, abs=1e-3), (ident, area)
        results = json.loads((tmp_path / "out" / "submissions" / ident / "results.json")
                             .read_text())
        assert valid_gradescope_results(results) == []
        assert [(t["name"], t["visibility"]) for t in results["tests"]] == [
            ("Case files", "visible"), ("Detach", "hidden")]
    assert float(book["ann"]["score"]) == 15 and float(book["ben"]["Case files"]) < 10
    page = (tmp_path / "out" / "class.html").read_text()
    assert "<a href='submissions/ben/report.html'>report</a>" in page
    assert "<td>ann</td>" in page and "[<code>recip-form</code>]: 1 of 2" in page


def test_gradescope_s_layout_is_graded_and_always_gets_its_results(tmp_path):
    """docs/grading.md, "On Gradescope": `grade --gradescope ROOT` reads the submission where
    Gradescope puts it and writes results.json where Gradescope reads it; a submission it
    cannot load scores 0 and says why; an autograder without a submission folder still
    writes results.json, saying so, and is a usage error."""
    def autograde(root):
        return subprocess.run([sys.executable, "-m", "gradient_conformance", "grade",
                               "--gradescope", str(root), "--module", "impl",
                               "--max-examples", "5", *SELECT], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
    root = tmp_path / "autograder"
    root.mkdir()
    _student(root / "submission", "depth_first")
    run = autograde(root)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    assert valid_gradescope_results(results) == []
    tapes = next(t for t in results["tests"] if t["name"] == "Tapes")
    assert 0 < tapes["score"] < tapes["max_score"] and tapes["status"] == "failed"
    # The first divergence as the terminal shows it, less the grader's own paths.
    assert "The first divergence:" in tapes["output"] and "--- the tape" in tapes["output"]
    assert "--- differing derivatives ---" in tapes["output"]
    assert "replay:" not in tapes["output"] and str(tmp_path) not in tapes["output"]
    assert results["output"] == "Each area below: how many of its tests passed, and its " \
        "first divergence."
    assert (root / "results" / "conformance" / "submissions" / "submission" /
            "report.html").exists()
    other = tmp_path / "other"
    (other / "submission").mkdir(parents=True)
    (other / "submission" / "notes.txt").write_text("my code is in the cloud\n")
    run = autograde(other)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((other / "results" / "results.json").read_text())
    assert valid_gradescope_results(results) == [] and results["score"] == 0
    assert results["output"] == "no implementation to load: no impl.py in it (--module)"
    empty = tmp_path / "empty"
    empty.mkdir()
    run = autograde(empty)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    results = json.loads((empty / "results" / "results.json").read_text())
    assert valid_gradescope_results(results) == [] and results["score"] == 0
    assert results["output"].startswith("The autograder could not grade this submission: ")


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (make test installs "
                    "Debian's chromium where it can: apt-get, as root)")
def test_the_class_page_in_a_real_browser(tmp_path):
    """Issue 56: the class page opened in headless Chromium. At 1200 px nothing overflows
    sideways, every label of the histogram is inside its picture (its tallest count was
    once cut off at the top), each cause is a heading with its count, and the screenshot
    is a picture. The page has no script of its own, so the measuring one goes into a copy."""
    submissions = _class(tmp_path / "class")
    for who in ("bob", "carol"):
        shutil.rmtree(submissions / who)
    graded = _grade(submissions, tmp_path / "out", "--jobs", "2")
    assert graded.returncode == 0, graded.stderr[-3000:]
    page = tmp_path / "measured.html"
    page.write_text((tmp_path / "out" / "class.html").read_text().replace("</body>", """<script>
        var root = document.documentElement, box = document.querySelector("svg");
        var frame = box.getBoundingClientRect(), outside = 0;
        document.querySelectorAll("svg text, svg rect").forEach(function (e) {
          var r = e.getBoundingClientRect();
          if (r.top < frame.top || r.bottom > frame.bottom) outside += 1; });
        document.body.setAttribute("data-fits", String(root.scrollWidth <= window.innerWidth));
        document.body.setAttribute("data-outside", String(outside));
        </script></body>"""))
    dom = _browse(page, tmp_path, "--dump-dom", "--window-size=1200,900")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-fits="true"' in dom.stdout and 'data-outside="0"' in dom.stdout, \
        re.findall(r'data-\w+="[^"]*"', dom.stdout)
    assert "<h3>crashes with KeyError: 1 of 3</h3>" in dom.stdout
    assert "[<code>tape-depth-first</code>]: 1 of 3</h3>" in dom.stdout
    shot = tmp_path / "class.png"
    _browse(tmp_path / "out" / "class.html", tmp_path, f"--screenshot={shot}",
            "--window-size=1200,1800")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


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
