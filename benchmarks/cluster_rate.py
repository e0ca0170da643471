"""`python -m benchmarks.cluster_rate`: cases per second of `fuzz --scheduler` with one Dask
worker and with two, on this machine's loopback. docs/fuzzing.md, "Fuzzing on a cluster".

For each count it starts a real scheduler and that many single-threaded workers (`dask
scheduler`, `dask worker`, as Dask documents them), fuzzes the implementation (the fast one
by default) for `--minutes`, and prints the cases run, the seconds from the first task's
submission to the last one's return, the cases per second, and the ratio of two workers to
one. Figures, not a test: the machine has two cores, which the implementation's own worker
processes share.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile

BIN = pathlib.Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*argv, log: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "dask"), *argv], stdout=subprocess.DEVNULL,
                            stderr=open(log, "w"), start_new_session=True, cwd=log.parent)


@contextlib.contextmanager
def local_cluster(folder: pathlib.Path, workers: int):
    """A scheduler and `workers` single-threaded workers on loopback, without nannies (so a
    killed worker stays dead), their logs in `folder`; yields the scheduler's address and
    the workers' processes (each the leader of its own process group)."""
    from distributed import Client
    address = f"tcp://127.0.0.1:{free_port()}"
    started = [_start("scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                      "--no-dashboard", log=folder / "scheduler.log")]
    started += [_start("worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                       "--name", f"w{k}", log=folder / f"worker{k}.log")
                for k in range(workers)]
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=60)
        yield address, started[1:]
    finally:
        for process in reversed(started):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def rate(spec: str, workers: int, minutes: float, task_seconds: float) -> tuple[int, float]:
    """Cases run and seconds taken by a fuzz run on a fresh cluster of `workers`."""
    from gradient_conformance.conformance.commands.fuzz import fuzz
    with tempfile.TemporaryDirectory() as folder, open(os.devnull, "w") as quiet:
        folder = pathlib.Path(folder)
        with local_cluster(folder, workers) as (address, _):
            progress = fuzz(spec, minutes=minutes, out=folder / "out", database="none",
                            scheduler=address, task_seconds=task_seconds, log=quiet)
        line = progress.history_line()
    return line["cases"], line["seconds"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_rate")
    parser.add_argument("--impl", default="gradient_conformance.implementations.fast")
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--task-seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    rates = {}
    for workers in (1, 2):
        cases, seconds = rate(args.impl, workers, args.minutes, args.task_seconds)
        rates[workers] = cases / seconds
        print(f"{workers} worker{'s' if workers > 1 else ''}: {cases} cases in {seconds:.1f} s, "
              f"{rates[workers]:.1f} cases/s", flush=True)
    if not rates[1]:
        print("two workers / one: no case ran on one worker; give it more --minutes")
        return 1
    print(f"two workers / one: {rates[2] / rates[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
