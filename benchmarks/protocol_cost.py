"""`python -m benchmarks.protocol_cost`: what one case costs through each transport.
docs/isolation.md, "Isolation"; SPEC.md, "The protocol".

Every case file of cases/ (a build and a run each) is sent to one implementation (the fast
one by default) in process, in a worker process (binary frames), and served over the
JSON-lines protocol (`cmd:python -m gradient_conformance serve ...`), in rounds that take
the transports in turn, so that the machine's noise falls on all three alike. It prints the
median time per case of each and its ratio to in process. The worker is measured three
ways: unconfined (as it was before SPEC.md's confinement), with its limits and scrubbed
environment only, and in the bubblewrap sandbox (where bubblewrap works); each confined one
with its cost over the unconfined, whose target is at most 10 %.

Then what a hang costs (docs/isolation.md, "Isolation"): implementations whose build loops in
Python,
or whose run loops in C without looking at signals, in a worker and served, with a case
timeout of `--hang-timeout` seconds. It prints the time from the call to its timeout
outcome, and from there to the next case's answer (the restart), each as a multiple of the
timeout. Target: the two together at most twice the timeout. Figures, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gradient_conformance import resource
from gradient_conformance.conformance.transports.confinement import (
    Confinement,
    bwrap_usable,
    default_memory_limit,
)
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.conformance.transports.worker import Worker
from gradient_conformance.reference import cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.protocol_cost")
    parser.add_argument("--impl", default="gradient_conformance.implementations.fast")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hang-timeout", type=float, default=2.0)
    args = parser.parse_args(argv)
    loaded = [cases.load_case(p) for p in cases.case_paths([resource("cases")])
              if p.suffix == ".ir"]
    work = [(c, cases.initial_buffers(c, cases.buffer_slots(c.source)))
            for c in loaded if c.error is None and not c.run_error]
    memory = default_memory_limit()
    transports = {
        "in process": load(args.impl, in_process=True),
        # The worker as it was before it was confined: no limits, the suite's environment.
        "worker, unconfined": Unconfined(args.impl),
        "worker, limits": load(args.impl, confinement=Confinement(memory, "none")),
        "worker, sandbox": load(args.impl, confinement=Confinement(memory, "bwrap"))
        if bwrap_usable() else None,
        "served (cmd:)": load(f"cmd:{sys.executable} -m gradient_conformance serve {args.impl}"),
    }
    transports = {name: impl for name, impl in transports.items() if impl is not None}
    seconds: dict[str, list[float]] = {name: [] for name in transports}
    for _ in range(args.rounds):
        for name, impl in transports.items():
            started = time.perf_counter()
            for case, buffers in work:
                impl.run_case(case.source, buffers, cases.buffer_slots(case.source))
            seconds[name].append((time.perf_counter() - started) / len(work))
    base = statistics.median(seconds["in process"])
    unconfined = statistics.median(seconds["worker, unconfined"])
    print(f"{len(work)} valid case files, {args.rounds} rounds, {args.impl}")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"{name:>18}: {1000 * median:7.2f} ms per case  ({median / base:.2f}x"
              + (f"; {100 * (median / unconfined - 1):+.1f}% over the unconfined worker)"
                 if name.startswith("worker,") and name != "worker, unconfined" else ")"))
    for impl in transports.values():
        getattr(impl.transport, "close", lambda: None)()
    hang_costs(work[0], args.hang_timeout)
    return 0


# Implementations that hang once, on a program holding the word HANG, and otherwise answer as
# the fast implementation does: so the next case shows what recovering costs.
HANGS = {
    "build loops in Python": """
from gradient_conformance.implementations import fast
def build(source):
    while "HANG" in source:
        pass
    return fast.build(source)
""",
    "run loops in C": """
import re
from gradient_conformance.implementations import fast
def build(source):
    run = fast.build(source)
    if "HANG" not in source:
        return run
    return lambda buffers: re.match(r"(a*)*b", "a" * 64)
""",
}


class Unconfined:
    """The fast path of `load` for a worker with no confinement: run_case and close."""

    def __init__(self, spec: str):
        self.transport = Worker(spec, os.getcwd(), 20.0)
        self.transport.start()

    def run_case(self, source, buffers, declared):
        return self.transport.case(source, buffers, declared)


def hang_costs(case_and_buffers, timeout: float) -> None:
    case, buffers = case_and_buffers
    declared = cases.buffer_slots(case.source)
    hanging = f"# HANG\n{case.source}"
    print(f"what a hang costs, with a case timeout of {timeout:g} s")
    with tempfile.TemporaryDirectory() as folder:
        for name, text in HANGS.items():
            module = Path(folder) / f"hangs_{len(name)}.py"
            module.write_text(text)
            for transport, spec in (("worker", str(module)),
                                    ("served", f"cmd:{sys.executable} -m gradient_conformance "
                                               f"serve {module}")):
                impl = load(spec, timeout=timeout)
                impl.run_case(case.source, buffers, declared)  # started and warm
                started = time.perf_counter()
                outcome = impl.run_case(hanging, buffers, declared)
                hung = time.perf_counter() - started
                started = time.perf_counter()
                after = impl.run_case(case.source, buffers, declared)
                recovered = time.perf_counter() - started
                impl.close()
                print(f"{name:>22}, {transport:>6}: {outcome.reason or outcome.status} after "
                      f"{hung:5.2f} s ({hung / timeout:.2f}x), next case {after.status} "
                      f"after {recovered:5.2f} s; together {(hung + recovered) / timeout:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
