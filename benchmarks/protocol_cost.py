"""`python -m benchmarks.protocol_cost`: what one case costs through each transport.
SPEC.md, "Isolation" and "The protocol".

Every case file of cases/ (a build and a run each) is sent to one implementation (the fast
one by default) in process, in a worker process (binary frames), and served over the
JSON-lines protocol (`cmd:python -m gradient_conformance serve ...`), in rounds that take
the transports in turn, so that the machine's noise falls on all three alike. It prints the
median time per case of each and its ratio to in process. Figures, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from gradient_conformance import resource
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.reference import cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.protocol_cost")
    parser.add_argument("--impl", default="gradient_conformance.implementations.fast")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    loaded = [cases.load_case(p) for p in cases.case_paths([resource("cases")])
              if p.suffix == ".ir"]
    work = [(c, cases.initial_buffers(c, cases.buffer_slots(c.source)))
            for c in loaded if c.error is None and not c.run_error]
    transports = {
        "in process": load(args.impl, in_process=True),
        "worker": load(args.impl),
        "served (cmd:)": load(f"cmd:{sys.executable} -m gradient_conformance serve {args.impl}"),
    }
    seconds: dict[str, list[float]] = {name: [] for name in transports}
    for _ in range(args.rounds):
        for name, impl in transports.items():
            started = time.perf_counter()
            for case, buffers in work:
                impl.run_case(case.source, buffers, cases.buffer_slots(case.source))
            seconds[name].append((time.perf_counter() - started) / len(work))
    base = statistics.median(seconds["in process"])
    print(f"{len(work)} valid case files, {args.rounds} rounds, {args.impl}")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"{name:>14}: {1000 * median:7.2f} ms per case  ({median / base:.2f}x)")
    for impl in transports.values():
        getattr(impl.transport, "close", lambda: None)()
    return 0


if __name__ == "__main__":
    sys.exit(main())
