"""The suite's words, tested where they matter: on the real systems the project installs
(issue 53, docs/commands.md, "Recheck"). Each is run under the ci profile as a user runs it,
with its JSON report; the run must end with its verdict (exit 1, no INTERNALERROR, not cut
short), and `gradient-conformance recheck` must find every claim of the report true: each
divergence reproduced, each named variant and decision borne out (with every gradient
stored, and on a decision's control program), each value or rejection location probed
again. Second tier: a whole ci run per system. A system whose environment is not installed
skips, saying so (make test installs the Python ones; make mxnet, make tfjs the others)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, suite
from tests.test_served_systems import SERVED, served

PYTHON_SYSTEMS = {
    "pytorch": ("torch", "gradient_conformance.adapters.torch_impl"),
    "tinygrad": ("tinygrad", "gradient_conformance.adapters.tinygrad_impl"),
    "micrograd": ("micrograd", "gradient_conformance.adapters.micrograd_impl"),
    "autograd": ("autograd", "gradient_conformance.adapters.autograd_impl"),
}
SYSTEMS = sorted([*PYTHON_SYSTEMS, *SERVED])


def _spec(name: str) -> str:
    if name in SERVED:
        served(name)
        return SERVED[name]
    module, spec = PYTHON_SYSTEMS[name]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: make test installs it")
    return spec


@pytest.mark.slow
@pytest.mark.parametrize("name", SYSTEMS)
def test_every_claim_of_a_run_on_a_real_system_holds(name, tmp_path):
    spec = _spec(name)
    report = tmp_path / "run.json"
    code, output, _ = suite(spec, "-q", f"--report-json={report}", examples=None,
                            shrink=True, timeout=2400, cwd=tmp_path)
    assert code == 1, output[-3000:]  # every one of them diverges somewhere
    assert "INTERNALERROR" not in output and "conformance verdict" in output, output[-3000:]
    kept = json.loads(report.read_text())
    assert kept["interrupted"] == "" and kept["divergences"], kept["interrupted"]
    checked = subprocess.run(
        [sys.executable, "-m", "gradient_conformance", "recheck", str(report),
         f"--impl={spec}"], cwd=ROOT, capture_output=True, text=True, timeout=2400)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 0, said
    assert "every one holds" in said and "reproduced: 0 " not in said, said
