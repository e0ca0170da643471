"""The adapter kit (adapters/kit.py): a framework gives its ops and its gradient, the kit gives
the rest. docs/adapters.md, "Adapters"; README.md, "Adapt your framework".

The adapters on the kit are held to three things: their op tables cover the IR (or the
capabilities say what is missing), an op left out is the framework's divergence with a clear
message and never the suite's crash, and the example the README shows is the file that runs.
"""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest

from gradient_conformance.adapters.eager import Refused
from gradient_conformance.adapters.kit import KEYWORD_OPS, Framework, FunctionalFramework
from gradient_conformance.reference.graph import SIGNATURES
from tests.conftest import ROOT

# The IR's value ops an adapter's table must give: loads are the kit's.
TABLE_OPS = set(SIGNATURES) - {"load"}
ON_THE_KIT = {"torch_impl": "torch", "jax_impl": "jax", "autograd_impl": "autograd",
              "tensorflow_impl": "tensorflow", "jax_jit_impl": "jax",
              "torch_compile_impl": "torch", "pytensor_impl": "pytensor",
              "warp_impl": "warp", "drjit_impl": "drjit"}
# What a flat system's table gives instead of the shape ops: the kit lowers them onto it.
FLAT_OPS = (TABLE_OPS - {"reduce", "expand", "reshape"}) | {"gather"}


def on_the_kit(name: str):
    try:
        importlib.import_module(ON_THE_KIT[name])
    except ImportError:
        pytest.skip(f"{ON_THE_KIT[name]} is not installed")
    try:
        return importlib.import_module(f"gradient_conformance.adapters.{name}")
    except ImportError as problem:  # Dr.Jit without LLVM 19 says so
        pytest.skip(str(problem))


@pytest.mark.parametrize("name", sorted(ON_THE_KIT))
def test_a_table_covers_the_ir_or_says_what_it_leaves_out(name):
    module = on_the_kit(name)
    framework = module.FRAMEWORK
    assert isinstance(framework, Framework | FunctionalFramework)
    wanted = FLAT_OPS if framework.flat else TABLE_OPS
    missing = wanted - set(framework.ops) - set(framework.capabilities["unsupported"])
    assert not missing, f"{name} gives no {sorted(missing)} and does not declare them"
    assert not set(framework.ops) - wanted, "an op the IR does not have"
    assert (module.NAME, module.VERSION) == (framework.name, framework.version)


LESSON = """%a = buffer slot=0 dtype=f32 shape=[]
%out = buffer slot=1 dtype=f32 shape=[]
%x = load %a
%y = sin %x
%g = gradient %y %x
store %out %g
"""


def test_an_op_left_out_is_a_crash_saying_so_not_a_rejection():
    """An op the adapter's table leaves out, and its capabilities do not declare
    unsupported, is the adapter's omission: a NotImplementedError, which the suite reports
    as a crash (impl-protocol.md), never a rejection that would pass a check of rejections
    without the system deciding anything (issue 53)."""
    module = on_the_kit("autograd_impl")

    without_sin = {k: v for k, v in module.OPS.items() if k != "sin"}

    class WithoutSin(type(module.FRAMEWORK)):
        ops = without_sin

    with pytest.raises(NotImplementedError, match="autograd has no sin in its adapter's table"):
        WithoutSin().build(LESSON)
    run = module.build(LESSON)  # the whole table: cos(0.5), by autograd
    out = run({0: np.array(0.5, np.float32), 1: np.zeros((), np.float32)})
    assert out[1].dtype == np.float32 and abs(float(out[1]) - np.cos(0.5)) < 1e-6


@pytest.mark.parametrize("name", sorted(set(ON_THE_KIT) - {"torch_compile_impl"}))
def test_loads_and_stores_of_one_element_keep_the_gradient(name):
    """The kit's stores and loads with an index, from reshape, expand, where and indexing (or
    the framework's own): x stored into element 1 of a buffer and loaded back is still x,
    so its gradient is 2x."""
    module = on_the_kit(name)
    run = module.build("""%a = buffer slot=0 dtype=f32 shape=[]
%m = buffer slot=1 dtype=f32 shape=[3]
%out = buffer slot=2 dtype=f32 shape=[]
%x = load %a
store %m %x 1
%e = load %m 1
%y = mul %e %x
%g = gradient %y %x
store %out %g
""")
    out = run({0: np.array(1.5, np.float32), 1: np.zeros(3, np.float32),
               2: np.zeros((), np.float32)})
    assert out[1].tolist() == [0.0, 1.5, 0.0]
    assert float(out[2]) == 3.0


def test_the_kit_decides_no_rejection_for_the_system():
    """Issue 53. The structure check stands a gradient in by an f32 value of x's shape, so a
    gradient against a buffer or of a buffer reaches the system, with the buffer's contents,
    and what the system makes of it is its answer (`detach %in` was the kit's rejection of
    reject/x_buffer.ir on six systems); and a programming error raised while the kit runs a
    program at build is the crash it is, not a rejection (an AttributeError passed two reject
    files), unless the adapter names its class as deliberate."""
    from gradient_conformance.adapters.eager import structure
    x_buffer = (ROOT / "cases" / "reject" / "x_buffer.ir").read_text()
    loss_buffer = ("%in = buffer slot=0 dtype=f32 shape=[]\n%x = load %in\n"
                   "%g = gradient %in %x\n")
    for source in (x_buffer, loss_buffer):
        structure(source)  # no IRError: the stand-ins are valid wherever x is
    module = on_the_kit("autograd_impl")
    for source in (x_buffer, loss_buffer):
        try:
            module.build(source)
        except Refused as refused:  # the system's own answer, from the system's code
            assert refused.__cause__ is not None and \
                type(refused.__cause__).__module__.split(".")[0] != "gradient_conformance"

    broken_ops = {**module.OPS, "mul": lambda a, b: a.no_such_attribute}

    class Broken(type(module.FRAMEWORK)):
        ops = broken_ops
    with pytest.raises(AttributeError):
        Broken().build(_with_mul(LESSON))
    assert "TypeError" in module.CAPABILITIES["rejection"]  # autograd's, named


def _with_mul(source: str) -> str:
    """The lesson's program with a mul in it, for an op table whose mul is broken."""
    return source.replace("%y = sin %x", "%y = mul %x %x")


def test_the_readme_points_at_the_example_that_runs_and_says_its_size():
    """README.md, "Adapt your framework", names adapters/autograd_impl.py as the whole adapter
    for HIPS autograd with its count of non-blank lines, which is true, and it is at most 60
    lines (issue 22); the kit's docstring, which README calls the guide, shows each path."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Adapt your framework", 1)[1].split("\n## ", 1)[0]
    said = re.search(r"`adapters/autograd_impl\.py` \((\d+) non-blank lines\)", section)
    source = (ROOT / "adapters" / "autograd_impl.py").read_text()
    assert said and int(said.group(1)) == sum(1 for line in source.splitlines() if line.strip())
    assert len(source.splitlines()) <= 60
    from gradient_conformance.adapters import kit
    assert all(name in kit.__doc__ for name in ("Framework", "FunctionalFramework", "flat"))
    assert KEYWORD_OPS <= set(re.findall(r'"(\w+)":', source))


def test_a_compiler_compiles_each_program_once_and_its_runs_use_it():
    """`compile` (jax.jit, torch.compile) is given the whole run as a function of the
    buffers' contents, once per build, with the first call's contents as its example; every
    run after goes through what it returned, and gives what the eager run gives."""
    module = on_the_kit("autograd_impl")
    compiled, calls = [], []

    class Compiling(type(module.FRAMEWORK)):
        def compile(self, function, example):
            compiled.append(sorted(example))

            def traced(arrays):
                calls.append(sorted(arrays))
                return function(arrays)
            return traced

    run = Compiling().build(LESSON)
    buffers = {0: np.array(0.5, np.float32), 1: np.zeros((), np.float32)}
    first, second = run(buffers), run(buffers)
    assert compiled == [["%a", "%out"]] and len(calls) == 3  # the build's run on zeros, two
    eager = module.build(LESSON)(buffers)
    assert first[1].tobytes() == second[1].tobytes() == eager[1].tobytes()


def test_jax_jit_drops_an_add_of_zero_that_eager_jax_keeps():
    """A finding of the compiled row: under jax.jit, XLA simplifies x + 0.0 to x, which is
    -0.0 where x is -0.0 (the spec, IEEE and eager JAX give +0.0)."""
    eager, jitted = on_the_kit("jax_impl"), on_the_kit("jax_jit_impl")
    source = (ROOT / "cases" / "ops" / "signed_zero_literals.ir").read_text()
    buffers = {0: np.array(-0.0, np.float32), 1: np.zeros((), np.float32),
               2: np.zeros((), np.float32)}
    bits = {name: module.build(source)(buffers)[2].view(np.uint32).item()
            for name, module in (("eager", eager), ("jit", jitted))}
    assert bits == {"eager": 0x00000000, "jit": 0x80000000}


def test_pytensor_rewrites_recip_times_x_to_one():
    """A finding of the PyTensor row: its graph rewrites turn recip(x) * x into 1.0, where
    the spec (and IEEE arithmetic, op by op) gives NaN at 0 and infinity, and 0.99999994 at
    41.0 (cases/ops/recip_times_x.ir)."""
    module = on_the_kit("pytensor_impl")
    source = (ROOT / "cases" / "ops" / "recip_times_x.ir").read_text()
    inputs = np.array([0x00000000, 0x7F800000, 0x42240000], np.uint32).view(np.float32)
    out = module.build(source.replace("shape=[5]", "shape=[3]"))(
        {0: inputs, 1: np.zeros(3, np.float32)})
    assert out[1].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.slow
def test_torch_compile_refuses_a_second_derivative_that_eager_torch_takes():
    """A finding of the torch.compile row: AOTAutograd has no double backward, so the
    worked example's second derivative, which eager PyTorch takes (12 at x = 2), is refused
    at build (cases/examples/second_derivative.ir)."""
    eager, compiled = on_the_kit("torch_impl"), on_the_kit("torch_compile_impl")
    source = (ROOT / "cases" / "examples" / "second_derivative.ir").read_text()
    out = eager.build(source)({0: np.array(2.0, np.float32), 1: np.zeros(2, np.float32)})
    assert out[1].tolist() == [12.0, 12.0]
    with pytest.raises(Refused, match=r"RuntimeError: .*double backward"):
        compiled.build(source)
