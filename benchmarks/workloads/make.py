"""The benchmark workloads that are too long to write by hand, as text. `python -m
benchmarks.workloads.make` rewrites them; tests/test_benchmarks.py checks that the committed
files are what this makes."""

from __future__ import annotations

import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def chain(nodes: int) -> str:
    """A chain of `nodes` elementwise ops on one scalar, and one gradient through all of it.
    The ops cycle through mul, add, sin and mul, so that values stay in range."""
    lines = [f"# A chain of {nodes} elementwise ops and one gradient through all of them.",
             "#: in 0 = 0.5",
             "%in = buffer slot=0 dtype=f32 shape=[]",
             "%out = buffer slot=1 dtype=f32 shape=[2]",
             "%v0 = load %in"]
    steps = ["mul %v{} 0.999", "add %v{} 0.001", "sin %v{}", "mul %v{} 1.001"]
    for k in range(1, nodes + 1):
        lines.append(f"%v{k} = " + steps[k % 4].format(k - 1))
    lines += [f"%g = gradient %v{nodes} %v0", f"store %out %v{nodes} 0", "store %out %g 1"]
    return "\n".join(lines) + "\n"


FILES = {"chain_1e4.ir": lambda: chain(10_000)}


def main() -> None:
    for name, make in FILES.items():
        (HERE / name).write_text(make())


if __name__ == "__main__":
    main()
