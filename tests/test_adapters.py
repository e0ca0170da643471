"""The adapters of issue 6: each real system runs the worked examples through its own
autodiff, makes its own rejections, and the suite finds its known differences from the spec.
A system that is not installed skips, with the reason. docs/adapters.md, "Adapters"."""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

from gradient_conformance.conformance.commands.replay import replay
from gradient_conformance.conformance.transports.loading import load
from tests.conftest import CASES, suite

EXAMPLES = CASES / "examples"
SYSTEMS = {"torch_impl": "torch", "tinygrad_impl": "tinygrad", "micrograd_impl": "micrograd",
           "jax_impl": "jax", "tensorflow_impl": "tensorflow", "autograd_impl": "autograd"}
HIGHER_ORDER = ["torch_impl", "tinygrad_impl", "jax_impl", "tensorflow_impl", "autograd_impl"]


def adapter(name: str):
    package = SYSTEMS[name]
    try:
        importlib.import_module(package)
    except ImportError:
        pytest.skip(f"{package} is not installed (pip install -e '.[{package.replace('_', '')}]')")
    return _loaded(name)


@functools.cache
def _loaded(name: str):
    """One worker per adapter for the whole module: importing a framework takes seconds."""
    return load(f"gradient_conformance.adapters.{name}")


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_the_lesson_figure(name):
    """(x * x) * x at x = 2: every system gets 12 (three shares of 4, in any order)."""
    impl = adapter(name)
    agrees, text = replay(impl, str(EXAMPLES / "lesson_three_shares.ir"))
    assert agrees, text


@pytest.mark.parametrize("name", HIGHER_ORDER)
def test_a_gradient_of_a_gradient(name):
    impl = adapter(name)
    agrees, text = replay(impl, str(EXAMPLES / "second_derivative.ir"))
    assert agrees, text


@pytest.mark.parametrize("name", ["torch_impl", "jax_impl"])
def test_the_system_refuses_a_non_scalar_loss_itself(name):
    """torch.autograd.grad and jax.grad refuse a loss with more than one element: the
    adapter passes the refusal on at build, and makes up none of its own."""
    impl = adapter(name)
    source = ("%in = buffer slot=0 dtype=f32 shape=[2]\n%x = load %in\n%y = mul %x %x\n"
              "%g = gradient %y %x\nstore %in %g\n")
    outcome = impl.build_only(source)
    assert outcome.status == "rejected"
    assert "scalar" in outcome.message.lower()


def test_micrograd_backprops_the_lesson_tape():
    impl = adapter("micrograd_impl")
    got = impl.run_backprop([["input", 2.0], ["mul", 0, 0], ["mul", 1, 0]])
    assert got.status == "ok"
    assert [float(np.uint32(b).view(np.float32)) for b in got.derivatives] == [12.0, 2.0, 1.0]


def test_micrograd_loses_the_sign_of_a_zero_derivative():
    """A finding: micrograd's grads start at 0.0 and add each share, so a derivative of -0.0
    comes back +0.0 (engine.py: `self.grad += ...`)."""
    impl = adapter("micrograd_impl")
    agrees, text = replay(impl, str(CASES / "tapes" / "signed_zero_share.json"))
    assert not agrees and "-0.0" in text


def _suite(name: str, *select: str) -> tuple[int, str]:
    code, output, _ = suite(f"gradient_conformance.adapters.{name}", "-q", *select)
    return code, output


def test_torch_s_accumulation_order_is_shown_but_not_demanded():
    """A finding: PyTorch's engine sums the shares a node receives in its own order, not the
    spec's arrival order; the diagnosis names the orders that reproduce its bits. PyTorch
    does not claim bit-exact gradients, so the suite does not demand them (it skips those
    checks, saying so: the file's point is those bits); replay, which compares as the checks
    do, compares nothing of it (NOT COMPARED), and shows and diagnoses the bits it does not
    claim."""
    impl = adapter("torch_impl")
    code, output = _suite("torch_impl", "-rs", "-k",
                          "accumulation_order.ir or summed_in_arrival_order")
    assert code == 0 and "does not claim bit-exact gradients" in output, output[-2000:]
    assert "whose point is those bits" in output, output[-2000:]
    agrees, text = replay(impl, str(CASES / "examples" / "accumulation_order.ir"),
                          diagnose=True)
    assert agrees is None and "which it does not claim, are not the file's" in text, text
    assert "NOT COMPARED" in text, text
    assert "diagnosis: the spec, but one that" in text and "[reversed-program-order]" in text
    assert "location: line " in text


def test_an_adapter_s_checks_skip_what_the_system_cannot_express():
    adapter("micrograd_impl")
    code, output = _suite("micrograd_impl", "-rs", "-k", "test_transcendental_within_declared_ulps")
    assert code == 0 and "exp2 is unsupported" in output, output[-2000:]


def test_micrograd_s_gradient_of_a_loss_that_x_does_not_reach_is_zero():
    """x off the loss's graph keeps no stale .grad from an earlier gradient statement."""
    impl = adapter("micrograd_impl")
    agrees, text = replay(impl, str(CASES / "gradient" / "detach_blocks_one_edge.ir"))
    assert agrees, text
