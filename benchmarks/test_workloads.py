"""Build and run, measured apart, for every workload and implementation, grouped by workload
so that pytest-benchmark's table compares the implementations (docs/benchmarks.md, "Benchmarks")."""

from __future__ import annotations

import pytest

from benchmarks.conftest import MEDIANS, ROUNDS, inputs, source_of
from gradient_conformance.reference.ops import features_of


def _skip_unsupported(implementation, source):
    missing = set(features_of(source)) & implementation.unsupported()
    if missing:
        pytest.skip(f"{implementation.label} does not support {sorted(missing)}")


def _record(benchmark, workload, phase, spec):
    if benchmark.stats is not None:
        MEDIANS.setdefault((workload, phase), {})[spec] = benchmark.stats.stats.median


def test_build(benchmark, implementation, impl_spec, workload):
    source = source_of(workload)
    _skip_unsupported(implementation, source)
    benchmark.group = f"{workload}: build"
    benchmark.pedantic(implementation.build, args=(source,), rounds=ROUNDS[workload],
                       iterations=1, warmup_rounds=0)
    _record(benchmark, workload, "build", impl_spec)


def test_run(benchmark, implementation, impl_spec, workload):
    source = source_of(workload)
    _skip_unsupported(implementation, source)
    run = implementation.build(source)
    buffers = inputs(source)
    benchmark.group = f"{workload}: run"
    result = benchmark.pedantic(lambda: run({k: v.copy() for k, v in buffers.items()}),
                                rounds=ROUNDS[workload], iterations=1, warmup_rounds=0)
    assert set(result) == set(buffers)  # it ran the whole program and gave every slot back
    _record(benchmark, workload, "run", impl_spec)
