"""Two systems in processes of their own, through the JSON-lines protocol (issue 15): MXNet
1.9.1 from its own venv (numpy 1.23.5), served by `gradient-conformance serve`, and
TensorFlow.js 4.22 in Node, a server written in JavaScript on the Node kit. Each skips,
saying why, only where its environment is not installed (make mxnet, make tfjs). docs/adapters.md,
"Adapters"."""

from __future__ import annotations

import functools
import shutil

import pytest

from gradient_conformance.conformance.commands.replay import replay
from gradient_conformance.conformance.transports.loading import load
from tests.conftest import CASES, ROOT, suite

EXAMPLES = CASES / "examples"
MXNET_PYTHON = ROOT / ".venv-mxnet" / "bin" / "python"
TFJS = ROOT / "adapters" / "tfjs"
SERVED = {
    "mxnet": f"cmd:{MXNET_PYTHON} -m gradient_conformance serve "
             "gradient_conformance.adapters.mxnet_impl",
    "tfjs": f"cmd:node {TFJS / 'server.mjs'}",
}


def served(name: str):
    if name == "mxnet" and not (ROOT / ".venv-mxnet" / ".ready").exists():
        pytest.skip("MXNet's venv is not installed: make mxnet")
    if name == "tfjs" and (shutil.which("node") is None or
                           not (TFJS / "node_modules" / "@tensorflow" / "tfjs-core").exists()):
        pytest.skip("Node or TensorFlow.js is not installed: make tfjs")
    return _loaded(name)


@functools.cache
def _loaded(name: str):
    return load(SERVED[name], base=str(ROOT), load_timeout=120)


@pytest.mark.parametrize("name", sorted(SERVED))
def test_the_lesson_figure(name):
    """(x * x) * x at x = 2 is 12, through each system's own autodiff, in another process."""
    agrees, text = replay(served(name), str(EXAMPLES / "lesson_three_shares.ir"))
    assert agrees, text


@pytest.mark.parametrize("name", sorted(SERVED))
def test_each_says_what_it_is_and_claims(name):
    impl = served(name)
    assert impl.name == {"mxnet": "mxnet", "tfjs": "tensorflow.js"}[name]
    assert impl.version == {"mxnet": "1.9.1", "tfjs": "4.22.0"}[name]
    assert {"shl", "shr", "bitcast"} <= impl.unsupported()
    assert impl.ulps("sin") == 2 and not impl.capabilities["bit_exact_gradients"]
    assert impl.provides("build")


@pytest.mark.parametrize("name", sorted(SERVED))
def test_detach(name):
    agrees, text = replay(served(name), str(EXAMPLES / "lesson_detach.ir"))
    assert agrees, text


def test_tfjs_takes_a_second_derivative():
    """Nested tf.grad: d/dx (d/dx x^3) at 2 is 12."""
    agrees, text = replay(served("tfjs"), str(EXAMPLES / "second_derivative.ir"))
    assert agrees, text


def test_mxnet_refuses_a_second_derivative_through_mul_itself():
    """A finding, not a limit of the adapter: in numpy mode, MXNet 1.9.1 has no second
    derivative of a product ("Operator _backward_npi_broadcast_mul is non-differentiable")."""
    outcome = served("mxnet").build_only((EXAMPLES / "second_derivative.ir").read_text())
    assert outcome.status == "rejected"
    assert "_backward_npi_broadcast_mul is non-differentiable" in outcome.message


def test_tfjs_refuses_a_loss_that_does_not_depend_on_x_itself():
    """A finding: tf.grad refuses a y that does not depend on x ("Cannot compute gradient of
    y=f(x) with respect to x"), where the spec gives zeros."""
    outcome = served("tfjs").build_only((EXAMPLES / "independent_zeros.ir").read_text())
    assert outcome.status == "rejected"
    assert "Cannot compute gradient" in outcome.message


@pytest.mark.parametrize("name", sorted(SERVED))
def test_the_suite_runs_each_and_diagnoses_what_it_finds(name):
    """The suite against the served system, on the worked examples: it runs to the end,
    fails where the system differs from the spec, and each divergence has a diagnosis."""
    served(name)
    code, output, _ = suite(SERVED[name], "-q", "-k", "examples/", timeout=1200)
    assert code == 1, output[-3000:]
    assert "diagnosis: " in output and "INTERNALERROR" not in output
    assert "the implementation was started again" not in output, output[-3000:]


def test_mxnet_s_venv_holds_only_what_the_served_side_needs():
    """The served side runs under numpy 1.23.5 with none of the suite's dependencies but
    mpmath (docs/adapters.md, "Adapters"): the server, the adapter and the reference's parser."""
    import subprocess
    served("mxnet")
    probe = ("import importlib.util, numpy; print(numpy.__version__, [m for m in "
             "('hypothesis', 'pytest', 'jinja2', 'gmpy2') if importlib.util.find_spec(m)])")
    out = subprocess.run([str(MXNET_PYTHON), "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split(maxsplit=1)
    assert out == ["1.23.5", "[]\n"]


def test_the_tfjs_server_refuses_what_the_structure_check_refuses():
    """Every case of cases/errors/ is refused by the Node kit with the reference's words, sent
    as the program's JSON, before TensorFlow.js is asked anything (adapters/kit.mjs)."""
    impl = served("tfjs")
    for path in sorted((CASES / "errors").glob("*.ir")):
        outcome = impl.build_only(path.read_text())
        assert outcome.status == "rejected", (path.name, outcome)
        assert "line" in outcome.message, (path.name, outcome.message)
