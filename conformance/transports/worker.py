"""The default transport: a Python module in a worker process of its own
(worker_process.py is the far side). docs/isolation.md, "Isolation"."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import numpy as np

from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.transports import calling, worker_process
from gradient_conformance.conformance.transports.answers import answered, derivatives
from gradient_conformance.conformance.transports.calling import LoadFailed
from gradient_conformance.conformance.transports.confinement import (
    Confinement,
    Ended,
    own_files,
    python_reach,
)
from gradient_conformance.conformance.transports.process import Child, ChildFailed, Holding
from gradient_conformance.reports.records import loads

WORKER_PROCESS = "gradient_conformance.conformance.transports.worker_process"
LOAD_TIMEOUT = 120.0  # importing a framework (PyTorch, TensorFlow) can take far longer than a case


class Worker(Holding):
    """A Python module in a worker process (its far side: worker_process.py), started at the
    first request and again after any failure that killed it. Every request has a deadline; on a
    timeout, a crash or a reply that breaks the protocol, the worker's whole session is
    killed."""

    def __init__(self, spec: str, base: str, timeout: float, load_timeout: float = LOAD_TIMEOUT,
                 confinement: Confinement | None = None):
        self.spec, self.base, self.timeout, self.load_timeout = spec, base, timeout, load_timeout
        self.confinement = confinement
        self.child: Child | None = None
        self.started = 0
        self.hello: dict = {}
        self._ended = Ended()  # of the processes it started and ended

    @property
    def restarts(self) -> int:
        return max(self.started - 1, 0)

    def start(self) -> dict:
        """Start the worker and load the module: what it said of itself, or LoadFailed. A
        worker its confinement cannot start (the sandbox or its control group gone) is
        LoadFailed too, never started without them."""
        try:
            self.child = Child([sys.executable, "-m", WORKER_PROCESS], cwd=self.base,
                               confinement=self.confinement, own_folder=True,
                               reach=python_reach(), own=own_files(self.spec, self.base))
        except (OSError, ValueError, subprocess.SubprocessError) as problem:
            raise LoadFailed(f"the worker could not be started under its confinement: "
                             f"{problem}") from None
        self.started += 1
        request = {"op": "hello", "spec": self.spec, "base": self.base,
                   "path": [p for p in sys.path if p]}
        try:
            reply, _ = self._exchange(request, b"", self.load_timeout, payload_limit=0)
        except ChildFailed as problem:
            output = self.child.output().strip() if self.child else ""
            self.stop()
            raise LoadFailed(f"the worker could not load it: {problem}"
                             + (f"\nits output:\n{output}" if output else "")) from None
        if not reply.get("ok"):
            self.stop()
            raise LoadFailed(str(reply.get("error", "")))
        self.hello = reply
        return reply

    def stop(self) -> None:
        self._let_go()

    close = stop

    def _exchange(self, header: dict, payload: bytes, seconds: float, *,
                  payload_limit: int) -> tuple[dict, bytes]:
        deadline = time.monotonic() + seconds
        assert self.child is not None, "started before any exchange"
        self.child.send(worker_process.frame(header, payload), deadline)
        sizes = self.child.receive_exactly(worker_process.FRAME.size, deadline)
        header_size, payload_size = worker_process.FRAME.unpack(sizes)
        if header_size > 1 << 20 or payload_size > payload_limit:
            raise ChildFailed("protocol", f"a reply of {header_size} + {payload_size} bytes, "
                              f"more than the request allows")
        try:
            reply = loads(self.child.receive_exactly(header_size, deadline))
        except (UnicodeDecodeError, ValueError) as problem:
            raise ChildFailed("protocol", f"a reply header that is not JSON: {problem}") \
                from None
        if not isinstance(reply, dict):
            raise ChildFailed("protocol", "a reply header that is not an object")
        return reply, self.child.receive_exactly(payload_size, deadline)

    def _request(self, header: dict, payload: bytes, payload_limit: int):
        """(reply, payload), or the Outcome of a failure (the worker then killed)."""
        if self.child is None or not self.child.alive():
            if self.child is not None:
                self.stop()
            try:
                self.start()
            except LoadFailed as problem:
                return answered("failure", f"the implementation could not be started again: "
                                f"{problem}", "crash")
        try:
            got = self._exchange(header, payload, self.timeout, payload_limit=payload_limit)
        except ChildFailed as problem:
            output = self.child.output().strip() if self.child else ""
            self.stop()
            return answered("failure", f"{problem}" + (f"\nits output:\n{output}" if output
                                                      else ""), problem.reason)
        self._after(got[0])
        return got

    def _after(self, reply: dict) -> None:
        """A worker that ran out of memory, or whose memory grew past the limit, is started
        again for the next case rather than left holding it (docs/isolation.md, "Isolation")."""
        assert self.child is not None  # it just replied
        self.child.sweep()
        ran_out = str(reply.get("message", "")).startswith("it ran out of memory")
        if ran_out or self.child.grown:
            self._ended.memory += 1
            self.stop()

    def case(self, source, buffers, declared) -> Outcome:
        listed, payload = worker_process.pack(buffers or {})
        header = {"op": "case", "source": source, "run": buffers is not None,
                  "buffers": listed,
                  "declared": [[s, d, list(shape)] for s, (d, shape) in sorted(declared.items())]}
        expected = {slot: (calling.DTYPE_STRINGS[d], tuple(shape))
                    for slot, (d, shape) in declared.items()}
        limit = sum(np.dtype(d).itemsize * math.prod(shape) for d, shape in expected.values())
        got = self._request(header, payload, limit)
        if isinstance(got, Outcome):
            return got
        reply, data = got
        status = reply.get("status")
        if status not in ("ok", "rejected", "run-error", "failure"):
            self.stop()
            return answered("failure", f"a reply with status {str(status)[:40]!r}", "protocol")
        if status != "ok":
            return answered(status, str(reply.get("message", "")), str(reply.get("reason", "")),
                            bool(reply.get("index")))
        if buffers is None:
            return Outcome("ok")
        return self._outputs(reply.get("outputs"), data, expected)

    def _outputs(self, listed, data: bytes, expected) -> Outcome:
        """The reply's arrays, read with the suite's numpy, exactly as declared."""
        try:
            slots = {int(slot): (str(dtype), tuple(int(n) for n in shape))
                     for slot, dtype, shape in listed}
        except (TypeError, ValueError):
            slots = None
        if slots != expected:
            self.stop()
            return answered("failure", "a reply whose outputs are not the declared slots",
                            "protocol")
        buffers, offset = {}, 0
        for slot, (dtype, shape) in sorted(expected.items()):
            count = math.prod(shape)
            buffers[slot] = np.frombuffer(data, dtype=dtype, count=count,
                                          offset=offset).reshape(shape).copy()
            offset += buffers[slot].nbytes
        if offset != len(data):
            self.stop()
            return answered("failure", "a reply whose payload does not match its outputs",
                            "protocol")
        return Outcome("ok", buffers=buffers)

    def backprop(self, tape) -> Outcome:
        entries = len(tape) if isinstance(tape, list) else 0
        try:
            header = {"op": "backprop", "tape": json.loads(json.dumps(tape))}
        except (TypeError, ValueError):
            header = {"op": "backprop", "tape": repr(tape)}
        got = self._request(header, b"", 8 * entries)
        if isinstance(got, Outcome):
            return got
        reply, data = got
        status = reply.get("status")
        if status == "ok":
            if len(data) % 8:
                self.stop()
                return answered("failure", "a backprop reply of a broken length", "protocol")
            return derivatives(np.frombuffer(data, "<f8").tolist(), entries)
        if status in ("rejected", "failure"):
            return answered(status, str(reply.get("message", "")), str(reply.get("reason", "")))
        self.stop()
        return answered("failure", f"a reply with status {str(status)[:40]!r}", "protocol")

    def build(self, source: str):
        raise NotImplementedError("benchmarks call a Python module in process")
