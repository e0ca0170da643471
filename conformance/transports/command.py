"""The JSON-lines client: `--impl=cmd:'PROGRAM ARGS'`, a process in any language that speaks
the protocol of jsonlines.py (SPEC.md, "The protocol"), standing between the suite and a
process it does not trust.

It reads strictly: a reply is one line of JSON (no NaN or Infinity, valid UTF-8, no longer
than the request allows) that answers the request's id with the fields the protocol gives
it. Anything else, a process that ends, or one that takes longer than the deadline, is a
failure; the process's session is killed, and it is started again for the next case.
"""

from __future__ import annotations

import json
import math
import subprocess
import time

import numpy as np

from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.transports.answers import answered
from gradient_conformance.conformance.transports.calling import LoadFailed, bounded
from gradient_conformance.conformance.transports.confinement import (
    Confinement,
    Ended,
    program_files,
    python_reach,
)
from gradient_conformance.conformance.transports.jsonlines import (
    DTYPE_NAMES,
    decode_buffer,
    encode_buffer,
    encode_tape,
    whole,
)
from gradient_conformance.conformance.transports.process import Child, ChildFailed, Holding
from gradient_conformance.reference.jsonform import program_json
from gradient_conformance.reports.records import loads


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


class Command(Holding):
    """A long-lived process that speaks the protocol; `case` and `backprop` give Outcomes."""

    def __init__(self, argv: list[str], *, timeout: float, cwd: str | None = None,
                 confinement: Confinement | None = None):
        self.argv, self.timeout, self.cwd = list(argv), timeout, cwd
        self.confinement = confinement
        self._ended = Ended()  # of the processes it started and ended
        self.child: Child | None = None
        self.started = 0
        self._next_id = 0
        self.json_program = False  # the server asked for the program as JSON too

    @property
    def restarts(self) -> int:
        return max(self.started - 1, 0)

    def probe(self, seconds: float) -> dict:
        """Start the program and ask it to build an empty program: LoadFailed unless it
        answers like a server of the protocol. The reply, which may describe the program
        ("name", "version", "capabilities")."""
        try:
            said = self._request({"build": ""}, limit=1 << 16, seconds=seconds)
        except (ChildFailed, OSError) as problem:
            output = self.child.output().strip() if self.child is not None else ""
            self.close()
            raise LoadFailed(f"cmd:{' '.join(self.argv)} did not start as a server of the "
                             f"protocol: {problem}"
                             + (f"\nits stderr:\n{output}" if output else "")) from None
        wants = said.get("program", "text")
        if wants not in ("text", "json"):
            self.close()
            raise LoadFailed(f"cmd:{' '.join(self.argv)} asks for the program as {wants!r}: "
                             "\"program\" may be \"text\" or \"json\" (SPEC.md, \"The "
                             "protocol\")")
        self.json_program = wants == "json"
        return said

    def _build(self, source: str) -> dict:
        """A build request: the text, and the program as JSON where the server asked."""
        if not self.json_program:
            return {"build": source}
        return {"build": source, "program": program_json(source)}

    def _start(self) -> None:
        try:
            self.child = Child(self.argv, cwd=self.cwd, confinement=self.confinement,
                               reach=python_reach(), own=program_files(self.argv, self.cwd))
        except (OSError, ValueError, subprocess.SubprocessError) as problem:
            # never started without the sandbox or control group it was decided to have
            raise ChildFailed("crash", f"it could not be started under its confinement: "
                              f"{problem}") from None
        self.started += 1

    def _request(self, body: dict, *, limit: int, seconds: float | None = None) -> dict:
        """Send one request and read its reply, or raise ChildFailed. The process serves
        until a request fails (then it is killed): the one started may have handed its pipes
        to a daemon of its own and exited."""
        if self.child is None:
            self._start()
        self._next_id += 1
        request_id = self._next_id
        deadline = time.monotonic() + (self.timeout if seconds is None else seconds)
        assert self.child is not None  # started just above
        self.child.send((json.dumps({"id": request_id, **body}) + "\n").encode(), deadline)
        line = self.child.receive_line(limit, deadline)
        try:
            reply = loads(line.decode("utf-8"), parse_constant=_no_constants)
        except UnicodeDecodeError:
            raise ChildFailed("junk", f"a reply that is not UTF-8: {line[:200]!r}") from None
        except ValueError as problem:
            raise ChildFailed("junk", f"not a JSON reply ({problem}): {line[:200]!r}") \
                from None
        if not isinstance(reply, dict) or reply.get("id") != request_id or \
                not isinstance(reply.get("ok"), bool):
            raise ChildFailed("junk", f"a reply to request {request_id} with \"ok\" true or "
                              f"false expected, got {line[:200]!r}")
        self.child.sweep()
        if self.child.grown:  # started again for the next request, not left holding it
            self._ended.memory += 1
            self.close()
        return reply

    def _failure(self, problem: ChildFailed, when: str):
        output = self.child.output().strip() if self.child is not None else ""
        self.close()
        return answered("failure", f"{when}: {problem}" + (f"\nits stderr:\n{output}"
                                                          if output else ""), problem.reason)

    def case(self, source, buffers, declared):
        try:
            reply = self._request(self._build(source), limit=1 << 20)
        except ChildFailed as problem:
            return self._failure(problem, "build")
        if not reply["ok"]:
            return self._refusal(reply, "rejected")
        if buffers is None:
            return Outcome("ok")
        elements = sum(math.prod(shape) for _, shape in declared.values())
        request = {"run": reply["id"], "buffers": {str(k): encode_buffer(v)
                                                   for k, v in buffers.items()}}
        try:
            reply = self._request(request, limit=(1 << 20) + 24 * elements)
        except ChildFailed as problem:
            return self._failure(problem, "run")
        if not reply["ok"]:
            return self._refusal(reply, "run-error")
        got = reply.get("buffers")
        try:
            if not isinstance(got, dict) or set(got) != {str(k) for k in declared}:
                shown = sorted(got)[:20] if isinstance(got, dict) else got
                raise ValueError(f"it returned slots {shown!r}, the program declares "
                                 f"{sorted(declared)}")
            out = {}
            for slot, (dtype, shape) in declared.items():
                array = decode_buffer(got[str(slot)])
                if DTYPE_NAMES[array.dtype] != dtype or array.shape != tuple(shape):
                    raise ValueError(f"slot {slot} came back as "
                                     f"{DTYPE_NAMES[array.dtype]}{list(array.shape)}, "
                                     f"declared {dtype}{list(shape)}")
                out[slot] = array
        except ValueError as problem:
            return answered("failure", bounded(f"run: a reply with malformed buffers: "
                                               f"{problem}"), "junk")
        return Outcome("ok", buffers=out)

    def _refusal(self, reply: dict, status: str):
        """An `ok: false` reply: the program's deliberate answer, unless it says it
        misbehaved (kind "failure", as `gradient-conformance serve` does)."""
        error, kind = reply.get("error", ""), reply.get("kind", "")
        if not isinstance(error, str) or not isinstance(kind, str):
            self.close()
            return answered("failure", "a reply whose error or kind is not a string", "junk")
        if kind == "failure":
            return answered("failure", error, "crash")
        return answered(status, error, index=kind == "index")

    def backprop(self, tape):
        entries = len(tape) if isinstance(tape, list) else 0
        try:
            reply = self._request({"backprop": encode_tape(tape)},
                                  limit=(1 << 20) + 12 * entries)
        except (TypeError, ValueError) as problem:
            return answered("failure", f"backprop: the tape could not be sent: {problem}",
                            "junk")
        except ChildFailed as problem:
            return self._failure(problem, "backprop")
        if not reply["ok"]:
            return self._refusal(reply, "rejected")
        derivatives = reply.get("derivatives")
        if not isinstance(derivatives, list) or len(derivatives) != entries or not all(
                whole(b) and 0 <= b < 2**32 for b in derivatives):
            return answered("failure", bounded(f"backprop: a reply without {entries} bit "
                                               f"patterns: {str(derivatives)[:200]}"), "junk")
        return Outcome("ok", derivatives=derivatives)

    def build(self, source: str):
        """A run callable over the protocol, for benchmarks."""
        reply = self._request(self._build(source), limit=1 << 20)
        if not reply["ok"]:
            raise ValueError(reply.get("error", ""))
        build_id = reply["id"]

        def run(buffers):
            elements = sum(np.asarray(v).size for v in buffers.values())
            got = self._request({"run": build_id, "buffers": {
                str(k): encode_buffer(v) for k, v in buffers.items()}},
                limit=(1 << 20) + 24 * elements)
            if not got["ok"]:
                raise RuntimeError(got.get("error", ""))
            return {int(k): decode_buffer(v) for k, v in got["buffers"].items()}
        return run

    def close(self) -> None:
        self._let_go()
