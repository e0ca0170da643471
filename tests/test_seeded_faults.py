"""The conformance suite under the `ci` profile kills every seeded fault, and passes the
reference and the fast implementation. SPEC.md, "The conformance suite"."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from implementations.faults import FAULTS
from tests.conftest import ROOT


def _suite(impl: str, *extra: str) -> tuple[int, str, float]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", f"--impl={impl}", "--profile=ci", "-q",
         "-p", "no:cacheprovider", *extra], cwd=ROOT, capture_output=True, text=True,
        timeout=600)
    return result.returncode, result.stdout + result.stderr, time.perf_counter() - started


@pytest.mark.parametrize("impl", ["reference", "implementations.fast"])
def test_the_correct_implementations_pass(impl, figures):
    code, output, seconds = _suite(impl)
    assert code == 0, output[-3000:]
    figures(f"suite: {impl} passes the ci profile in {seconds:.1f} s "
            f"({output.strip().splitlines()[-1]})")


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_seeded_fault_is_killed(fault, figures):
    code, output, _ = _suite(f"implementations.faults.{fault}")
    assert code == 1, f"the fault {fault} ({FAULTS[fault][0]}) survived:\n{output[-3000:]}"
    caught = sorted({m.group(1) for m in re.finditer(
        r"FAILED conformance/(\w+)\.py::(?:\w+)", output)})
    tests = sorted({m.group(0).split("::")[1].split("[")[0] for m in re.finditer(
        r"FAILED conformance/\w+\.py::\w+", output)})
    figures(f"kill: {fault:20} caught by {', '.join(tests)} ({', '.join(caught)})")
