"""The conformance suite under the `ci` profile kills every seeded fault, and passes the
reference and the fast implementation. SPEC.md, "The conformance suite"."""

from __future__ import annotations

import re

import pytest

from gradient_conformance.implementations.faults import FAULTS
from tests.conftest import FAST, suite
from tests.conftest import FAULTS as FAULTS_PACKAGE


@pytest.mark.parametrize("impl", ["reference", FAST])
def test_the_correct_implementations_pass(impl, figures):
    code, output, seconds = suite(impl, "--profile=ci", "-q")
    assert code == 0, output[-3000:]
    figures(f"suite: {impl} passes the ci profile in {seconds:.1f} s "
            f"({output.strip().splitlines()[-1]})")


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_seeded_fault_is_killed(fault, figures):
    code, output, _ = suite(f"{FAULTS_PACKAGE}.{fault}", "--profile=ci", "-q")
    assert code == 1, f"the fault {fault} ({FAULTS[fault][0]}) survived:\n{output[-3000:]}"
    failed = re.findall(r"FAILED \S*checks/(\w+)\.py::(\w+)", output)
    assert failed, output[-3000:]
    figures(f"kill: {fault:20} caught by {', '.join(sorted({t for _, t in failed}))} "
            f"({', '.join(sorted({m for m, _ in failed}))})")
