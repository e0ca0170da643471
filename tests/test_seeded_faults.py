"""The conformance suite under the `ci` profile kills every seeded fault, and passes the
reference and the fast implementation; and a module gives the same outcome of every case in
its worker as in the suite's process. SPEC.md, "The conformance suite", "Isolation"."""

from __future__ import annotations

import re

import pytest

from gradient_conformance.conformance.commands.vectors import KINDS, draw_cases
from gradient_conformance.conformance.implementation import load
from gradient_conformance.generators.tapes import invalid_tapes, tapes
from gradient_conformance.implementations.faults import FAULTS, TAPE_FAULTS
from gradient_conformance.reference import cases
from tests.conftest import CASES, FAST, suite
from tests.conftest import FAULTS as FAULTS_PACKAGE

PROGRAMS = [(c.source, c.buffers) for _, strategy, _ in KINDS
            for c in draw_cases(strategy, 8, seed=1)]
PROGRAMS += [(case.source, cases.initial_buffers(case, cases.buffer_slots(case.source)))
             for case in map(cases.load_case, cases.case_paths([CASES]))
             if case.error is None]
TAPES = [c.tape for strategy in (tapes(), invalid_tapes())
         for c in draw_cases(strategy, 20, seed=1, key=lambda c: repr(c.tape))]


def test_the_reference_passes(figures):
    code, output, seconds = suite("reference", "--profile=ci", "-q")
    assert code == 0, output[-3000:]
    figures(f"suite: the reference passes the ci profile in {seconds:.1f} s "
            f"({output.strip().splitlines()[-1]})")


def test_the_fast_implementation_passes(figures):
    code, output, seconds = suite(FAST, "--profile=ci", "-q")
    assert code == 0, output[-3000:]
    figures(f"suite: the fast implementation passes the ci profile in {seconds:.1f} s "
            f"({output.strip().splitlines()[-1]})")


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_seeded_fault_is_killed(fault, figures):
    code, output, _ = suite(f"{FAULTS_PACKAGE}.{fault}", "--profile=ci", "-q")
    assert code == 1, f"the fault {fault} ({FAULTS[fault][0]}) survived:\n{output[-3000:]}"
    failed = re.findall(r"FAILED \S*checks/(\w+)\.py::(\w+)", output)
    assert failed, output[-3000:]
    figures(f"kill: {fault:20} caught by {', '.join(sorted({t for _, t in failed}))} "
            f"({', '.join(sorted({m for m, _ in failed}))})")


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
