"""The conformance suite under the `ci` profile kills every seeded fault, and passes the
reference and the fast implementation; and a module gives the same outcome of every case in
its worker as in the suite's process.

Two tiers (README, "The commands on a fresh clone"): `make test` runs each fault with -x,
the least work that shows it killed, diagnosed by its name and located (its first failing
check's divergences); `make test-all` runs each under the whole ci profile, every check, as
the measure of the suite's power. docs/suite.md, "The conformance suite";
docs/isolation.md, "Isolation"."""

from __future__ import annotations

import json
import re

import pytest

from gradient_conformance.conformance.commands.vectors import PROGRAM_KINDS, draw_cases
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.generators.tapes import invalid_tapes, tapes
from gradient_conformance.implementations.faults import FAULTS, TAPE_FAULTS
from gradient_conformance.reference import cases
from tests.conftest import CASES, FAST, suite
from tests.conftest import FAULTS as FAULTS_PACKAGE

PROGRAMS = [(c.source, c.buffers) for _, strategy, _ in PROGRAM_KINDS
            for c in draw_cases(strategy, 8, seed=1)]
PROGRAMS += [(case.source, cases.initial_buffers(case, cases.buffer_slots(case.source)))
             for case in map(cases.load_case, cases.case_paths([CASES]))
             if case.error is None]
TAPES = [c.tape for strategy in (tapes(), invalid_tapes())
         for c in draw_cases(strategy, 20, seed=1, key=lambda c: repr(c.tape))]


@pytest.mark.slow
def test_the_reference_passes(figures):
    code, output, seconds = suite("reference", "--profile=ci", "-q", examples=None,
                                  shrink=True)
    assert code == 0, output[-3000:]
    figures(f"suite: the reference passes the ci profile in {seconds:.1f} s "
            f"({output.strip().splitlines()[-1]})")


@pytest.mark.parametrize("examples", [5, pytest.param(None, id="ci", marks=pytest.mark.slow)])
def test_the_fast_implementation_passes(examples, figures):
    """The first tier's form: every check and case file, each generated check at 5 cases
    (a false failure of the suite on a conforming implementation shows on any case; the
    case files and enumerations run whole); the second's, the ci profile whole."""
    code, output, seconds = suite(FAST, "--profile=ci", "-q", examples=examples,
                                  shrink=examples is None)
    assert code == 0, output[-3000:]
    figures(f"suite: the fast implementation passes the ci profile"
            f"{'' if examples is None else f' at {examples} cases a check'} in {seconds:.1f} s "
            f"({output.strip().splitlines()[-1]})")


# What each seeded fault is, as the catalogue of variants names it
# (conformance/diagnosis/variants.py).
DIAGNOSED_AS = {
    "reversed_fold": "reversed-arrival", "creation_order": "creation-order",
    "detach_passes": "detach-passes", "literal_x": "without-x-literal",
    "max_tie_first": "max-tie-first", "pairwise_reduce": "pairwise-reduce",
    "flush_to_zero": "flush-results", "reduce_mul_on_path": "reduce-mul-as-add",
    "nonscalar_loss": "nonscalar-loss-summed", "recip_form": "recip-form",
    "scopes_kept_apart": "scopes-kept-apart", "tape_program_order": "tape-program-order",
    "tape_const_zero": "tape-const-zero", "tape_same_operand_once": "tape-same-operand-once",
}


# Where each seeded fault departs, as its divergences' locations must say: the kind of
# departure and the op of the statement it names (None: any op), for at least one divergence;
# every divergence has a variant or a location (conformance/diagnosis/locate.py); and every
# divergence located at a statement is located at one of the places in ALSO_AT or this one
# (a fault of arithmetic shows in the values a gradient computes too), or lists candidates,
# or says why it cannot tell.
LOCATED_AT = {
    "reversed_fold": ("fold", None), "creation_order": ("fold", None),
    "detach_passes": ("blocked", "detach"), "literal_x": ("rejection", "gradient"),
    "max_tie_first": ("share", "max"), "pairwise_reduce": ("value", "reduce"),
    "flush_to_zero": ("value", None), "reduce_mul_on_path": ("rejection", "gradient"),
    "nonscalar_loss": ("rejection", "gradient"), "recip_form": ("share", "recip"),
    "scopes_kept_apart": ("loop", "range"), "tape_program_order": ("sum", None),
    "tape_const_zero": ("leaf", "const"), "tape_same_operand_once": ("share", None),
}
ALSO_AT = {
    "flush_to_zero": {("share", None), ("fold", None), ("literal", None)},
    # Let through a detach, a gradient reaches a reduce op=mul, which it then refuses. And
    # the gradient of an x reached only through a detach, the zeros of its shape, is one node
    # with an `expand 0.0` written beside it (the enumerated `identity/zeros`): let through,
    # it is a node of its own, located at the gradient whose rule forms decide which nodes it
    # builds (detach's reproducing every output).
    "detach_passes": {("blocked", "cast"), ("rejected", None), ("rule-form", "gradient")},
    "scopes_kept_apart": {("value", None)}, "literal_x": {("rejection", "gradient")},
    # expand's share is a reduce op=add: its sum rounds as the fault sums.
    "pairwise_reduce": {("share", "reduce"), ("share", "expand")},
    # In a second derivative (the enumerated `recip/second`, log2's), recip's share is a node
    # the first gradient's statement built: the second walk finds it there.
    "recip_form": {("share", "gradient")},
}


def assert_located_at(name: str, divergences: list[dict], output: str) -> None:
    """At least one divergence located at the place the fault departs, and every one within
    the fault's places or saying why not."""
    kind, op = LOCATED_AT[name]
    located = [d["location"] for d in divergences if d["location"].get("line")]
    assert any(w["kind"] == kind and op in (None, w["op"]) for w in located), \
        [d["location_line"] for d in divergences]
    allowed = {LOCATED_AT[name], *ALSO_AT.get(name, ())}
    for d in divergences:
        assert d["location"].get("line") or d["diagnosis"].get("variants") or \
            d["diagnosis"].get("pairs"), (d["summary"], d["location_line"])
        where = d["location"]
        if where.get("line"):
            assert any(where["kind"] == k and o in (None, where["op"]) for k, o in allowed), \
                (name, d["summary"], d["location_line"])
        else:
            assert where.get("reason") or where.get("candidates"), d["location_line"]
    assert "location: line " in output or "location: entry " in output


def assert_diagnosed_as(name: str, divergences: list[dict], output: str) -> int:
    """Every diagnosed divergence names `name` (alone, or in a pair when nothing alone
    does), at least one does, in the report and in the terminal: never a wrong name."""
    named = 0
    for d in divergences:
        alone = [v["name"] for v in d["diagnosis"].get("variants", [])]
        pairs = [[v["name"] for v in pair] for pair in d["diagnosis"].get("pairs", [])]
        if alone:
            assert name in alone, (d["summary"], d["diagnosis_line"])
        elif pairs:
            assert any(name in pair for pair in pairs), (d["summary"], d["diagnosis_line"])
        named += name in alone
    assert named, [d["diagnosis_line"] for d in divergences]
    assert f"[{name}]" in output
    return named


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_seeded_fault_is_killed_named_and_located_at_its_first_failure(fault, tmp_path,
                                                                            figures):
    """The first tier's form: the ci profile with -x, so the run stops at the first check
    that kills the fault (the case files run first). Its divergences name the fault's
    variant and no other, one is located where the fault departs, and each within the
    fault's places or says why not."""
    report = tmp_path / "r.json"
    code, output, seconds = suite(f"{FAULTS_PACKAGE}.{fault}", "--profile=ci", "-q", "-x",
                                  f"--report-json={report}", examples=None, shrink=True)
    assert code == 1, f"the fault {fault} ({FAULTS[fault][0]}) survived:\n{output[-3000:]}"
    divergences = json.loads(report.read_text())["divergences"]
    named = assert_diagnosed_as(DIAGNOSED_AS[fault], divergences, output)
    assert_located_at(fault, divergences, output)
    figures(f"kill -x: {fault:20} in {seconds:4.1f} s, by "
            f"{divergences[0]['check']}; named in {named} of {len(divergences)}")


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_seeded_fault_is_killed_and_diagnosed_by_its_name(fault, tmp_path, figures):
    report = tmp_path / "r.json"
    code, output, _ = suite(f"{FAULTS_PACKAGE}.{fault}", "--profile=ci", "-q",
                            f"--report-json={report}", examples=None, shrink=True)
    assert code == 1, f"the fault {fault} ({FAULTS[fault][0]}) survived:\n{output[-3000:]}"
    failed = re.findall(r"FAILED \S*checks/(\w+)\.py::(\w+)", output)
    assert failed, output[-3000:]
    divergences = json.loads(report.read_text())["divergences"]
    named = assert_diagnosed_as(DIAGNOSED_AS[fault], divergences, output)
    assert_located_at(fault, divergences, output)
    figures(f"kill: {fault:20} caught by {', '.join(sorted({t for _, t in failed}))}; "
            f"diagnosed as {DIAGNOSED_AS[fault]} in {named} of {len(divergences)}")


def _same(a, b) -> bool:
    """Two outcomes alike: status, what an error blamed, and every output's bits."""
    return (a.status, a.index, a.derivatives, sorted(a.buffers)) == \
        (b.status, b.index, b.derivatives, sorted(b.buffers)) and all(
            a.buffers[k].tobytes() == b.buffers[k].tobytes() for k in a.buffers)


@pytest.mark.parametrize("impl", [FAST] + [f"{FAULTS_PACKAGE}.{f}"
                                           for f in sorted({*FAULTS, *TAPE_FAULTS})])
def test_a_worker_and_the_suite_s_process_give_the_same_outcomes(impl):
    """The worker changes where the module runs, never what it answers: case for case, the
    same status and the same bits. (Whole runs may differ: Hypothesis draws constants from
    the modules loaded in its process, and in process those include the implementation's.)"""
    worker, in_process = load(impl), load(impl, in_process=True)
    try:
        compared = 0
        if worker.provides("build"):
            for source, buffers in PROGRAMS:
                slots = cases.buffer_slots(source)
                a = worker.run_case(source, buffers, slots)
                b = in_process.run_case(source, buffers, slots)
                assert _same(a, b), (source, a, b)
                compared += 1
        if worker.provides("backprop"):
            for tape in TAPES:
                a, b = worker.run_backprop(tape), in_process.run_backprop(tape)
                assert _same(a, b), (tape, a, b)
                compared += 1
        assert compared >= min(len(PROGRAMS), len(TAPES)) > 30 and worker.restarts == 0
    finally:
        worker.close()
        in_process.close()
