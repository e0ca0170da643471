"""The benchmarks of issue 7 run, on a fresh clone, and measure what they say: the committed
workloads are what their generator makes, every workload runs on the reference and the fast
implementation, and the speed script prints its figures. No timing is asserted here (SPEC.md,
"Benchmarks")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.suite_speed import chain_figures
from benchmarks.workloads.make import FILES, HERE
from gradient_conformance.conformance.transports.confinement import bwrap_usable
from tests.conftest import ROOT


def test_the_generated_workloads_are_committed_as_made():
    for name, make in FILES.items():
        assert (HERE / name).read_text() == make(), "rerun python -m benchmarks.workloads.make"


def test_every_workload_builds_and_runs_on_both():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks", "--impl=implementations.fast",
         "--benchmark-disable", "-q", "-p", "no:cacheprovider", "-k", "not wide_sum"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "16 passed" in run.stdout, run.stdout[-1000:]


def test_the_speed_script_prints_its_figures():
    run = subprocess.run([sys.executable, "-m", "benchmarks.suite_speed", "--examples", "5",
                          "--no-chains", "--impl", "reference"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    for check in ("forward bits", "gradient bits", "finite differences", "rejection"):
        assert check in run.stdout
    assert "draw only" in run.stdout and "target" in run.stdout


def test_chain_figures_are_per_node():
    [(n, build, run)] = chain_figures((2_000,))
    assert n == 2_000 and build > 0 and run > 0  # figures, not targets: never asserted


def test_the_suite_modes_script_prints_its_ratios():
    run = subprocess.run([sys.executable, "-m", "benchmarks.suite_modes", "--max-examples", "2",
                          "--only", "in process", "--only", "worker"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[1].startswith("in process") and " 1.00x " in lines[1]
    assert lines[2].startswith("worker") and "passed" in lines[2]


def test_the_explain_cost_script_prints_explanation_s_share_of_a_run():
    run = subprocess.run([sys.executable, "-m", "benchmarks.explain_cost", "--impl",
                          "variant:reversed-arrival", "--max-examples", "3"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines[1].startswith("variant:reversed-arrival") and " divergences " in lines[1]
    assert "explained in" in lines[1] and lines[2].startswith("explanation's share of a run")


def test_the_protocol_cost_script_prints_a_time_per_case_for_each_transport():
    """Then what a hang costs: each hanging implementation times out in each transport, and
    the case after it is answered."""
    run = subprocess.run([sys.executable, "-m", "benchmarks.protocol_cost", "--rounds", "1",
                          "--hang-timeout", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert "valid case files" in lines[0]
    names = ["in process", "worker, unconfined", "worker, limits", "worker, sandbox",
             "served (cmd:)"]
    if not bwrap_usable():
        names.remove("worker, sandbox")
    shown = len(names) + 1
    assert [line.split(": ")[0].strip() for line in lines[1:shown]] == names
    assert lines[shown] == "what a hang costs, with a case timeout of 1 s"
    hangs = lines[shown + 1:]
    assert len(hangs) == 4, hangs
    assert all(": timeout after" in line and "next case ok" in line for line in hangs), hangs
    assert "(1.00x)" in lines[1] and all("ms per case" in line for line in lines[1:shown])
    assert "over the unconfined worker" in lines[3]


def test_the_cluster_script_prints_the_rate_of_one_worker_and_of_two():
    pytest.importorskip("distributed", reason="the [cluster] extra (make test installs it)")
    # The figures' form, not their worth: a few seconds of each cluster is enough to print.
    run = subprocess.run([sys.executable, "-m", "benchmarks.cluster_rate", "--minutes", "0.2",
                          "--task-seconds", "8"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("1 worker: ") and "cases/s" in lines[0], run.stdout
    assert lines[1].startswith("2 workers: ") and "cases/s" in lines[1], run.stdout
    assert lines[2].startswith("two workers / one: "), run.stdout


def test_draw_rates_count_the_choices_a_case_takes():
    """The share beside as many bare choices is measured with the strategy's own count."""
    from hypothesis import strategies as st

    from gradient_conformance.generators.rates import beside_trivial, choices_only, rates_table
    three = beside_trivial(choices_only(3), examples=20, rounds=1)
    assert three.choices == 3 and three.rate > 0 and three.of_trivial > 0
    pair = beside_trivial(st.tuples(st.integers(), st.integers()), examples=20, rounds=1)
    assert pair.choices == 2
    table = rates_table({"three": three, "pair": pair}).splitlines()
    assert table[0].split()[:2] == ["strategy", "cases/s"] and table[1].startswith("three")


def test_the_shrink_script_prints_what_each_fault_shrank_to():
    """One seed of each fault, so that the script is known to run; the sizes it prints are
    figures. A program that shows either fault has at least six statements: an input and an
    output buffer, a load, an op whose rule differs, the gradient and its store."""
    run = subprocess.run([sys.executable, "-m", "benchmarks.shrink_sizes", "--seeds", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["recip_form", "reversed_fold"], run.stdout
    for line in lines:
        size = line.split("seeds 1-1: ")[1].split(";")[0]
        assert size.isdigit() and int(size) >= 6, line


def test_the_first_answer_script_prints_start_up_first_divergence_and_statements():
    """One start-up, the case files alone against one fault: the script runs, and each of its
    figures is a number (the figures themselves are README's, from a whole run)."""
    run = subprocess.run([sys.executable, "-m", "benchmarks.first_answer", "--runs", "1",
                          "--select", "case_file and recip", "--faults", "recip_form"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("start-up to the first case: median "), run.stdout
    assert float(lines[1].split(": ")[1].split(" s")[0]) > 0, lines[1]  # not nan: seen
    assert "with -x" in lines[2] and float(lines[2].split(": ")[1].split(" s")[0]) > 0
    assert lines[3].startswith("  recip_form: 2 program divergences"), run.stdout
    assert lines[4].startswith("statements of the reported programs over 1 seeded fault")
