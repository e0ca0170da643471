"""The conformance suite under the `ci` profile kills every seeded fault, and passes the
reference and the fast implementation; and the isolated worker gives the same outcomes, check
for check, as calling the module in process. SPEC.md, "The conformance suite", "Isolation"."""

from __future__ import annotations

import json
import re

import pytest

from gradient_conformance.implementations.faults import FAULTS
from tests.conftest import FAST, suite
from tests.conftest import FAULTS as FAULTS_PACKAGE


def _ci(impl: str, tmp_path, *mode: str) -> tuple[int, str, float, dict]:
    """(exit status, output, seconds, check -> outcome counts) of a ci run."""
    report = tmp_path / f"report-{len(mode)}.json"
    code, output, seconds = suite(impl, "--profile=ci", "-q", f"--report-json={report}", *mode)
    checks = json.loads(report.read_text())["checks"] if report.exists() else {}
    return code, output, seconds, checks


def _alike(impl: str, tmp_path) -> tuple[int, str, float]:
    """The ci run in a worker, and again in process: the same outcome of every check (the
    worker changes where the module runs, never what the checks decide)."""
    code, output, seconds, isolated = _ci(impl, tmp_path)
    in_code, in_output, _, in_process = _ci(impl, tmp_path, "--in-process")
    assert (code, isolated) == (in_code, in_process) and isolated, (output[-2000:],
                                                                    in_output[-2000:])
    return code, output, seconds


def test_the_reference_passes(figures):
    code, output, seconds = suite("reference", "--profile=ci", "-q")
    assert code == 0, output[-3000:]
    figures(f"suite: the reference passes the ci profile in {seconds:.1f} s "
            f"({output.strip().splitlines()[-1]})")


def test_the_fast_implementation_passes_alike_isolated_and_in_process(tmp_path, figures):
    code, output, seconds = _alike(FAST, tmp_path)
    assert code == 0, output[-3000:]
    figures(f"suite: the fast implementation passes the ci profile in {seconds:.1f} s "
            f"({output.strip().splitlines()[-1]})")


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_seeded_fault_is_killed_alike_isolated_and_in_process(fault, tmp_path, figures):
    code, output, _ = _alike(f"{FAULTS_PACKAGE}.{fault}", tmp_path)
    assert code == 1, f"the fault {fault} ({FAULTS[fault][0]}) survived:\n{output[-3000:]}"
    failed = re.findall(r"FAILED \S*checks/(\w+)\.py::(\w+)", output)
    assert failed, output[-3000:]
    figures(f"kill: {fault:20} caught by {', '.join(sorted({t for _, t in failed}))} "
            f"({', '.join(sorted({m for m, _ in failed}))})")
