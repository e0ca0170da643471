"""`pytest benchmarks --impl=A --impl=B ...`: build and run times of fixed workloads, per
implementation, the reference always among them. docs/benchmarks.md, "Benchmarks".

The implementations come from the conformance plugin's `--impl` (repeatable here). Each
workload's inputs are fixed (seeded), so every implementation runs the same thing.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.reference import cases

WORKLOADS = pathlib.Path(__file__).resolve().parent / "workloads"
# Workload -> rounds: the slow ones (the reference on 10^6 elements, or 10^4 nodes) run
# fewer times; pytest-benchmark's table shows how many.
ROUNDS = {"chain_1e4": 3, "wide_sum": 3, "mlp_step": 5, "grad_of_grad": 5, "loop_1e3": 3}
# Figures the terminal summary turns into ratios: (workload, phase) -> impl -> median s.
MEDIANS: dict[tuple[str, str], dict[str, float]] = {}


def specs(config) -> list[str]:
    given = config.getoption("--impl") or ["gradient_conformance.implementations.fast"]
    return ["reference", *[s for s in given if s != "reference"]]


def pytest_generate_tests(metafunc):
    if "impl_spec" in metafunc.fixturenames:
        metafunc.parametrize("impl_spec", specs(metafunc.config), scope="session")
    if "workload" in metafunc.fixturenames:
        metafunc.parametrize("workload", sorted(p.stem for p in WORKLOADS.glob("*.ir")))


_LOADED: dict[str, object] = {}


@pytest.fixture(scope="session")
def implementation(impl_spec):
    if impl_spec not in _LOADED:
        # In process: nothing between the clock and the implementation (a cmd: program is
        # timed through its protocol, as it must be).
        _LOADED[impl_spec] = load(impl_spec, in_process=True)
    return _LOADED[impl_spec]


def source_of(workload: str) -> str:
    return (WORKLOADS / f"{workload}.ir").read_text()


def inputs(source: str) -> dict[int, np.ndarray]:
    """Seeded inputs: f32 slots uniform in [-1, 1], others zero."""
    rng = np.random.default_rng(2026)
    out = {}
    for slot, (dtype, shape) in sorted(cases.buffer_slots(source).items()):
        if dtype == "f32":
            out[slot] = rng.uniform(-1, 1, size=shape).astype(np.float32)
        else:
            out[slot] = np.zeros(shape, cases.NUMPY[dtype])
    return out


def pytest_terminal_summary(terminalreporter, config):
    if not MEDIANS:
        return
    terminalreporter.section("medians as ratios to the reference")
    impls = specs(config)
    width = max(len(s) for s in impls)
    terminalreporter.write_line(f"{'workload':<14} {'phase':<6} " + " ".join(
        f"{s:>{max(width, 12)}}" for s in impls))
    for (workload, phase), per in sorted(MEDIANS.items()):
        base = per.get("reference")
        cells = []
        for s in impls:
            if s not in per:
                cells.append(f"{'-':>{max(width, 12)}}")
            elif base:
                cells.append(f"{per[s] / base:>{max(width, 12)}.4f}")
            else:
                cells.append(f"{per[s]:>{max(width, 11)}.4g}s")
        terminalreporter.write_line(f"{workload:<14} {phase:<6} " + " ".join(cells))
    terminalreporter.write_line("(1.0 is the reference; below 1 is faster. The reference's own "
                                "medians, in seconds:)")
    for (workload, phase), per in sorted(MEDIANS.items()):
        if "reference" in per:
            terminalreporter.write_line(f"  {workload} {phase}: {per['reference']:.4g} s")
