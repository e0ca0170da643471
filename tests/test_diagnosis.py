"""Diagnosis (docs/diagnosis.md, "Diagnosis"): the catalogue's variants are what they
say, compose, and
name what an implementation did; a fault outside the catalogue gets no name; and the
catalogue is the suite's measure of power (a sample of `mutants`)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from gradient_conformance import reference
from gradient_conformance.conformance.diagnosis.diagnose import diagnose_case
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE, EQUIVALENT, numpy_sum_row
from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.reference import cases, exact
from gradient_conformance.reports.records import counted
from tests.conftest import CASES, ROOT, suite

OUTSIDE = str(ROOT / "tests" / "impls" / "exp2_constant.py")


def test_numpy_sum_is_numpy_s_own():
    """The numpy-sum variant sums a row of f32 exactly as numpy's add.reduce does (the
    numpy installed), on lengths around its block sizes, with signed zeros and big spreads."""
    rng = np.random.default_rng(7)
    lengths = [1, 2, 3, 7, 8, 9, 15, 16, 17, 64, 127, 128, 129, 200, 255, 256, 257, 1000]
    for n in lengths:
        for trial in range(6):
            values = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 8, n)).astype(
                np.float32)
            if trial == 0:
                values = np.full(n, -0.0, np.float32)
            if trial == 1:
                values = np.where(rng.random(n) < 0.5, -0.0, 0.0).astype(np.float32)
            want = np.add.reduce(values)
            got = numpy_sum_row(values.view(np.uint32).tolist())
            assert exact.same_f32(got, int(np.float32(want).view(np.uint32))), (n, trial)


def test_every_variant_is_described_and_has_a_section_of_the_spec():
    spec = (ROOT / "SPEC.md").read_text()
    for variant in CATALOGUE.values():
        assert variant.says and variant.says[0].islower(), variant.name
        heading = f"## {variant.section}\n" in spec or f"**{variant.section}.**" in spec
        assert heading, (variant.name, variant.section)
    assert set(EQUIVALENT) <= set(CATALOGUE)


def _run(semantics, source, buffers):
    return reference.build(source, semantics)({k: v.copy() for k, v in buffers.items()})


def test_variants_compose():
    """Two variants applied one after the other are both in effect."""
    source = (CASES / "gradient" / "op_form_recip.ir").read_text()
    case = cases.parse_case(source)
    buffers = cases.initial_buffers(case, cases.buffer_slots(source))
    recip = CATALOGUE["recip-form"].semantics()
    both = CATALOGUE["flush-results"].change(recip)
    assert both.rules["recip"] is recip.rules["recip"]
    assert type(both.domain).__name__.endswith("ftz")
    assert _run(both, source, buffers)[1].tobytes() == _run(recip, source, buffers)[1].tobytes()


def _case_file(name: str):
    source = (CASES / name).read_text()
    case = cases.parse_case(source)
    return source, cases.initial_buffers(case, cases.buffer_slots(source))


def test_a_variant_is_named_only_when_it_gives_every_bit():
    source, buffers = _case_file("gradient/op_form_recip.ir")
    want = Outcome("ok", _run(reference.SPEC, source, buffers))
    got = Outcome("ok", _run(CATALOGUE["recip-form"].semantics(), source, buffers))
    named = diagnose_case(Reading(source), buffers, want, got)
    assert "recip-form" in named.variants and named.tried > 0
    assert named.line().startswith("diagnosis: the spec, but one that")
    off = {k: v.copy() for k, v in got.buffers.items()}
    off[1] = (off[1].view(np.uint32) ^ np.uint32(1)).view(np.float32)  # one more bit wrong
    nothing = diagnose_case(Reading(source), buffers, want, Outcome("ok", off))
    assert not nothing.found and "no known variant" in nothing.line()
    crashed = diagnose_case(Reading(source), buffers, want, Outcome("failure", reason="crash"))
    assert not crashed.found and not crashed.tried


@pytest.mark.parametrize("name", ["nonscalar-loss-summed", "without-loss-not-f32-scalar"])
def test_a_variant_that_accepts_a_loss_of_any_shape_sums_it_as_it_says(name):
    """Issue 53: both gave 1.0 for the loss `expand %x shape=[2]`, as if one copy counted,
    where summing the loss (their words) gives 2.0; a non-scalar loss's seed is now 1.0 at
    every element. The derivative of sum(x * x) over a vector, 2x, is the other check."""
    semantics = CATALOGUE[name].semantics()
    source = ("%a = buffer slot=0 dtype=f32 shape=[]\n%x = load %a\n"
              "%y = expand %x shape=[2]\n%g = gradient %y %x\nstore %a %g\n")
    assert _run(semantics, source, {0: np.array(0.75, np.float32)})[0] == 2.0
    source = ("%a = buffer slot=0 dtype=f32 shape=[2]\n%x = load %a\n%y = mul %x %x\n"
              "%g = gradient %y %x\nstore %a %g\n")
    got = _run(semantics, source, {0: np.array([0.75, 1.5], np.float32)})[0]
    assert got.tolist() == [1.5, 3.0]


def test_a_missed_rejection_is_diagnosed_by_the_rule_missing():
    source = (CASES / "examples" / "lesson_literal_x.ir").read_text()
    buffers = cases.initial_buffers(cases.parse_case(source), cases.buffer_slots(source))
    got = _run(CATALOGUE["without-x-literal"].semantics(), source, buffers)
    impl = load("variant:without-x-literal", in_process=True)
    try:
        named = diagnose_case(Reading(source), buffers, Outcome("rejected"),
                              Outcome("ok", buffers=got), impl=impl)
        assert named.variants == ["without-x-literal"]
        # Where the implementation was only asked to build (a check of rejections), the
        # variants are only built too, and then run beside it to compare values.
        built = diagnose_case(Reading(source), {}, Outcome("rejected"), Outcome("ok"),
                              impl=impl)
        assert built.variants == ["without-x-literal"] and built.verified_on == 2
    finally:
        impl.close()


def test_a_fault_outside_the_catalogue_gets_no_name(tmp_path):
    report = tmp_path / "r.json"
    code, output, _ = suite(OUTSIDE, "-q", "--max-examples=60", "--no-shrink",
                            f"--report-json={report}", "-k", "exp2 or tape")
    assert code == 1, output[-3000:]
    divergences = json.loads(report.read_text())["divergences"]
    assert divergences
    for d in divergences:
        assert d["diagnosis"] and not d["diagnosis"]["variants"], d["diagnosis_line"]
        assert not d["diagnosis"]["pairs"], d["diagnosis_line"]
        assert "no known variant" in d["diagnosis_line"]
    assert "diagnosis: no known variant reproduces these results" in output
    assert f"; {counted(len(divergences), 'divergence')} re-run under the catalogue's " \
        "variants, confirmed and probed" in output and "reduction and explanation: " in output


def test_the_failure_stage_s_figure_counts_reduction_with_explanation():
    """docs/diagnosis.md, "The failure stage": one budget covers reducing and explaining, so
    the figure counts both (before, a run whose reducer took 73 of its 79 s said
    explanation was "0.0%" of it)."""
    from gradient_conformance.reports.records import Divergence
    from gradient_conformance.reports.terminal import failure_stage_lines
    d = Divergence("test_x", "test_x", "differs", reduction="reduced: from 9 statements to 3 "
                   "(...)", reduce_seconds=73.0, diagnosis={"tried": 76, "seconds": 0.5},
                   location={"seconds": 0.3, "runs": 2})
    [line] = failure_stage_lines([d], 79.0, 600.0)
    assert line == ("reduction and explanation: 1 divergence reduced in 73.0 s; 1 divergence "
                    "re-run under the catalogue's variants, confirmed and probed (2 runs of "
                    "the implementation) in 0.8 s; together 73.8 s, 93.4% of the run's 79 s "
                    "(their budget: 600 s)")
    assert failure_stage_lines([Divergence("test_x", "test_x", "differs")], 79.0, 600.0) == []


def test_a_stage_budget_of_nothing_reports_each_divergence_as_found_and_fails_the_same(
        tmp_path):
    """docs/diagnosis.md, "The failure stage": `--stage-budget` bounds reducing and
    explaining; past it a divergence is reported as found, saying why, and the checks that
    fail are the same ones (grade's per-submission budget rests on it)."""
    import json

    from tests.conftest import suite
    failed = {}
    for budget in ("0", "600"):
        report = tmp_path / f"{budget}.json"
        code, output, _ = suite("variant:recip-form", "-k", "case_file and recip",
                                f"--stage-budget={budget}", f"--report-json={report}",
                                shrink=True)
        assert code == 1, output[-2000:]
        ran = json.loads(report.read_text())
        failed[budget] = sorted(c for c, n in ran["checks"].items() if n.get("failed"))
        reasons = [d["diagnosis"].get("reason", "") for d in ran["divergences"]]
        if budget == "0":
            assert reasons and all(r.startswith("not explained: the run spent its 0 s")
                                   for r in reasons), reasons
            assert all(d["reduction"] == "reduced: no (the run spent its 0 s for reducing "
                       "and explaining divergences)" for d in ran["divergences"]), \
                [d["reduction"] for d in ran["divergences"]]
        else:
            assert "recip-form" in output and not any(r.startswith("not explained")
                                                      for r in reasons), reasons
    assert failed["0"] == failed["600"] and failed["0"]
    code, output, _ = suite("reference", "--stage-budget=-1")
    assert code == 2 and "the budget is a number of seconds, 0 or more" in output, output


def test_the_matrix_says_what_each_system_does_from_its_diagnoses():
    """The conformance table's findings are the diagnoses, counted per system."""
    from gradient_conformance.reports.matrix import findings, markdown
    from gradient_conformance.reports.records import Divergence, Report

    def named(name):
        return {"name": name, "says": CATALOGUE[name].says, "section": CATALOGUE[name].section}
    order = {"variants": [named("program-order"), named("pairwise")], "pairs": []}
    diagnoses = [order, order, {"variants": [named("flush-results")]},
                 {"variants": [], "pairs": []}, {"variants": [], "pairs": []},
                 {"reason": "a crash"}]
    locations = [{}, {}, {}, {"line": 7, "kind": "share", "op": "recip"},
                 {"reason": "the program does not build"},
                 {"reason": "the implementation misbehaved"}]
    divergences = [Divergence(check=str(k), test_id="", summary="", diagnosis=d, location=w)
                   for k, (d, w) in enumerate(zip(diagnoses, locations, strict=True))]
    report = Report(implementation={"name": "sys", "version": "1"}, divergences=divergences,
                    checks={"c": {"failed": 2}})
    said = findings(report)
    assert said[:2] == ["`program-order` or `pairwise`: 2", "`flush-results`: 1"]
    assert said[2:] == ["no known variant, located (1): share at `recip` 1",
                        "neither (2): the implementation misbehaved 1; the program does not "
                        "build 1"]
    text = markdown({"sys": (report, "")})
    assert f"- `pairwise`: {CATALOGUE['pairwise'].says} (SPEC.md, \"The walk\")" in text
    assert "- **sys**: " + "; ".join(said) + "." in markdown({"sys": (report, "")})


@pytest.mark.parametrize("name", sorted(random.Random(14).sample(sorted(CATALOGUE), 3)))
def test_a_sample_of_the_catalogue_is_killed(name):
    """The catalogue as mutants (the whole run: gradient-conformance mutants)."""
    code, output, _ = suite(f"variant:{name}", "-q", "-x")
    assert code == 1 or name in EQUIVALENT, output[-3000:]


def test_what_a_variant_changes_is_a_typed_part_of_the_semantics():
    """A variant's parts are values, not strings to parse: each names a field of the
    Semantics; a rule's part names a row of the rules (its op and reduce's op=), a domain's
    part a method or an entry of its tables; each prints as the dotted name reports use."""
    import dataclasses

    from gradient_conformance.conformance.diagnosis.variants import DOMAIN_TABLES, Part, parts
    from gradient_conformance.reference import SPEC, Semantics
    fields = {f.name for f in dataclasses.fields(Semantics)}
    seen = set()
    for variant in CATALOGUE.values():
        for part in parts(variant):
            assert isinstance(part, Part) and part.field in fields, (variant.name, part)
            if part.field == "rules":
                row = ".".join(filter(None, (part.key, part.sub)))
                assert row in SPEC.rules or part.key not in SPEC.rules, (variant.name, part)
            if part.table is not None:
                assert part.key in DOMAIN_TABLES and part.sub, (variant.name, part)
            seen.add(str(part))
    assert {"rules.reduce.max", "domain.overrides.idiv", "domain.fold_row", "post_order"} <= seen


@pytest.mark.slow
def test_the_whole_catalogue_is_killed(figures):
    """The second tier: `gradient-conformance mutants` over the catalogue's tape variants,
    the ci profile against each, stopping at its first failure: each killed (or listed as
    equivalent, with its reason), and the command says so. Every other variant is a program
    variant, and tests/test_located_catalogue.py's ci run of each holds that it is killed
    (exit 1) as it locates its divergences: one run a variant, not two."""
    from tests.test_located_catalogue import PROGRAMS
    tapes = sorted(set(CATALOGUE) - set(PROGRAMS))
    assert tapes and all(CATALOGUE[name].tape for name in tapes)
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "mutants", "--jobs",
                          "2", *(f"--variant={name}" for name in tapes)],
                         capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    killed = re.search(r"^(\d+) of (\d+) killed; survivors: none", run.stdout, re.M)
    assert killed and killed.group(2) == str(len(tapes)), run.stdout[-2000:]
    figures(f"mutants: {killed.group(0)} (the tape variants; the {len(PROGRAMS)} program "
            "variants are killed in the located catalogue's runs)")


def test_a_divergence_parses_its_program_at_most_twice(monkeypatch):
    """The check's reading, and at most one more: describing it (the cone, the trace, the
    case file) and diagnosing it (every variant, and the pairs) build from that parse."""
    import sys

    from gradient_conformance.conformance.divergence import describe
    from gradient_conformance.conformance.explain import Explainer
    from gradient_conformance.conformance.findings import Finding, ProgramCase
    from gradient_conformance.reference import syntax
    source, buffers = _case_file("gradient/op_form_recip.ir")
    parsed = []
    original = syntax.parse

    def counting(text, *args, **kwargs):
        parsed.append(text)
        return original(text, *args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "parse", None) is original:
            monkeypatch.setattr(module, "parse", counting)
    reading = Reading(source)
    want = reading.outcome(buffers)
    off = {k: v.copy() for k, v in want.buffers.items()}
    off[1] = (off[1].view(np.uint32) ^ np.uint32(1)).view(np.float32)  # no variant does this
    finding = Finding("s", want, Outcome("ok", off), ProgramCase(reading, buffers))
    d = describe("check", "id", finding)
    Explainer().explain(d, finding)
    assert d.diagnosis["tried"] > 20  # every variant that could matter was built and run
    assert d.trace and d.case_text and d.highlight
    # The issue allows two; the check's own reading is the only one.
    assert parsed.count(source) == 1, parsed.count(source)
