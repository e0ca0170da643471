"""`--impl=cmd:'PROGRAM ARGS'`: an implementation in any language, over JSON lines. SPEC.md,
"The protocol".

    -> {"id": 1, "build": "<program text>"}
    <- {"id": 1, "ok": true}                      or {"id": 1, "ok": false, "error": "..."}
    -> {"id": 2, "run": 1, "buffers": {"0": {"dtype": "f32", "shape": [5], "bits": [...]}}}
    <- {"id": 2, "ok": true, "buffers": {...}}    or {"id": 2, "ok": false, "error": "...",
                                                      "kind": "index"}
    -> {"id": 3, "backprop": [["input", 1073741824], ["mul", 0, 0]]}
    <- {"id": 3, "ok": true, "derivatives": [...]} or {"id": 3, "ok": false, "error": "..."}

Here are the codec (buffers and tape leaves as raw 32-bit patterns), the client `Command`,
which stands between the suite and a process it does not trust, and `serve`, the server loop
`gradient-conformance serve MODULE` runs for any Python module.

The client reads strictly: a reply is one line of JSON (no NaN or Infinity, valid UTF-8, no
longer than the request allows) that answers the request's id with the fields the protocol
gives it. Anything else, a process that ends, or one that takes longer than the deadline, is a
failure; the process's session is killed, and it is started again for the next case.
"""

from __future__ import annotations

import json
import math
import struct
import time

import numpy as np

from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.transports import calling
from gradient_conformance.conformance.transports.answers import answered
from gradient_conformance.conformance.transports.calling import DTYPE_STRINGS, LoadFailed, bounded
from gradient_conformance.conformance.transports.description import describe_module
from gradient_conformance.conformance.transports.process import Child, ChildFailed

DTYPE_NAMES = {np.dtype(numpy_dtype): name for name, numpy_dtype in DTYPE_STRINGS.items()}
LEAVES = ("input", "const")


# --- the codec -----------------------------------------------------------------------------


def encode_buffer(array: np.ndarray) -> dict:
    """A numpy array as the protocol's buffer: dtype, shape, and raw 32-bit patterns."""
    array = np.asarray(array)
    bits = array.astype(np.uint32) if array.dtype == np.bool_ else array.view(np.uint32)
    return {"dtype": DTYPE_NAMES[array.dtype], "shape": list(array.shape),
            "bits": bits.ravel().tolist()}


def decode_buffer(value) -> np.ndarray:
    """The protocol's buffer as a numpy array (signed patterns read modulo 2**32), or
    ValueError saying what is malformed."""
    if not isinstance(value, dict) or value.get("dtype") not in DTYPE_STRINGS:
        raise ValueError("a buffer is {\"dtype\": f32|i32|bool, \"shape\": [...], \"bits\": "
                         "[...]}")
    shape, bits = value.get("shape"), value.get("bits")
    if not isinstance(shape, list) or not all(_whole(n) and n >= 0 for n in shape):
        raise ValueError("a buffer's shape is a list of non-negative integers")
    if not isinstance(bits, list) or len(bits) != math.prod(shape) or not all(
            _whole(b) and -2**31 <= b < 2**32 for b in bits):
        raise ValueError(f"a buffer of shape {shape} has {math.prod(shape)} bit patterns, "
                         "each an integer in [-2^31, 2^32)")
    patterns = np.array([b & 0xFFFFFFFF for b in bits], dtype=np.uint64).astype(np.uint32)
    patterns = patterns.reshape(shape)
    if value["dtype"] == "bool":
        return patterns.astype(np.bool_)
    return patterns.view(DTYPE_STRINGS[value["dtype"]]).copy()


def _whole(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool)


def encode_tape(tape) -> list:
    """A tape for the wire: each leaf's value as its f32 bits, rounded once. A value that is
    no number (an invalid tape's) goes as it is, and the far side must reject it."""
    from gradient_conformance.reference.tape import value_bits
    out = []
    for entry in tape if isinstance(tape, list) else [tape]:
        if isinstance(entry, list | tuple) and len(entry) == 2 and entry[0] in LEAVES and \
                isinstance(entry[1], int | float) and not isinstance(entry[1], bool):
            out.append([entry[0], value_bits(0, entry[1])])
        else:
            out.append(list(entry) if isinstance(entry, list | tuple) else entry)
    return out if isinstance(tape, list) else tape


def decode_tape(wire) -> list:
    """A tape from the wire: leaf bits back to f32 values; anything else as it came, for the
    implementation to judge."""
    if not isinstance(wire, list):
        return wire
    out = []
    for entry in wire:
        if isinstance(entry, list) and len(entry) == 2 and entry[0] in LEAVES and \
                _whole(entry[1]):
            if 0 <= entry[1] < 2**32:
                out.append([entry[0], struct.unpack("<f", struct.pack("<I", entry[1]))[0]])
            else:
                out.append([entry[0], str(entry[1])])  # no bit pattern: an invalid value
        else:
            out.append(entry)
    return out


# --- the client ----------------------------------------------------------------------------


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


class Command:
    """A long-lived process that speaks the protocol; `case` and `backprop` give Outcomes."""

    def __init__(self, argv: list[str], *, timeout: float, cwd: str | None = None):
        self.argv, self.timeout, self.cwd = list(argv), timeout, cwd
        self.child: Child | None = None
        self.started = 0
        self._next_id = 0

    @property
    def restarts(self) -> int:
        return max(self.started - 1, 0)

    def probe(self, seconds: float) -> dict:
        """Start the program and ask it to build an empty program: LoadFailed unless it
        answers like a server of the protocol. The reply, which may describe the program
        ("name", "version", "capabilities")."""
        try:
            return self._request({"build": ""}, limit=1 << 16, seconds=seconds)
        except (ChildFailed, OSError) as problem:
            output = self.child.output().strip() if self.child is not None else ""
            self.close()
            raise LoadFailed(f"cmd:{' '.join(self.argv)} did not start as a server of the "
                             f"protocol: {problem}"
                             + (f"\nits stderr:\n{output}" if output else "")) from None

    def _start(self) -> None:
        self.child = Child(self.argv, cwd=self.cwd)
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
        self.child.send((json.dumps({"id": request_id, **body}) + "\n").encode(), deadline)
        line = self.child.receive_line(limit, deadline)
        try:
            reply = json.loads(line.decode("utf-8"), parse_constant=_no_constants)
        except UnicodeDecodeError:
            raise ChildFailed("junk", f"a reply that is not UTF-8: {line[:200]!r}") from None
        except ValueError as problem:
            raise ChildFailed("junk", f"not a JSON reply ({problem}): {line[:200]!r}") \
                from None
        if not isinstance(reply, dict) or reply.get("id") != request_id or \
                not isinstance(reply.get("ok"), bool):
            raise ChildFailed("junk", f"a reply to request {request_id} with \"ok\" true or "
                              f"false expected, got {line[:200]!r}")
        return reply

    def _failure(self, problem: ChildFailed, when: str):
        output = self.child.output().strip() if self.child is not None else ""
        self.close()
        return answered("failure", f"{when}: {problem}" + (f"\nits stderr:\n{output}"
                                                          if output else ""), problem.reason)

    def case(self, source, buffers, declared):
        try:
            reply = self._request({"build": source}, limit=1 << 20)
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
                _whole(b) and 0 <= b < 2**32 for b in derivatives):
            return answered("failure", bounded(f"backprop: a reply without {entries} bit "
                                               f"patterns: {str(derivatives)[:200]}"), "junk")
        return Outcome("ok", derivatives=derivatives)

    def build(self, source: str):
        """A run callable over the protocol, for benchmarks."""
        reply = self._request({"build": source}, limit=1 << 20)
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
        if self.child is not None:
            self.child.kill()
            self.child = None


# --- the server ----------------------------------------------------------------------------

KEPT_BUILDS = 64  # a server keeps the programs of its latest builds


def serve(module, lines, write) -> None:
    """Answer each request line with one reply line, until the input ends, calling
    `module` as conformance/calling.py does: its statuses are the suite's."""
    programs: dict[int, object] = {}
    described = False
    for line in lines:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            reply = {"id": request["id"]}
        except (ValueError, KeyError, TypeError):
            write(json.dumps({"id": None, "ok": False, "error": "not a request",
                              "kind": "failure"}) + "\n")
            continue
        if not described:  # the first reply says what the module is (SPEC.md, "The protocol")
            described = True
            reply.update(describe_module(module))
        if "build" in request:
            answer = calling.call_build(module, request["build"])
            if answer.status == "ok":
                programs[request["id"]] = answer.value
                for old in sorted(programs)[:-KEPT_BUILDS]:
                    del programs[old]
        elif "backprop" in request:
            answer = calling.call_backprop(module, decode_tape(request["backprop"]))
            if answer.status == "ok":
                bits = [struct.unpack("<I", struct.pack("<f", v))[0] for v in answer.value
                        if _is_single(v)]
                if len(bits) == len(answer.value):
                    answer.value = bits
                else:
                    answer = calling.Answer("failure", "a derivative that is not an f32 "
                                            "value: computed in another precision?")
        else:
            answer = _serve_run(programs, request)
        if answer.status == "ok":
            reply["ok"] = True
            if isinstance(answer.value, dict):
                reply["buffers"] = {str(k): encode_buffer(v) for k, v in answer.value.items()}
            elif isinstance(answer.value, list):
                reply["derivatives"] = answer.value
        else:
            reply.update(ok=False, error=answer.message)
            if answer.status == "failure":
                reply["kind"] = "failure"
            elif answer.index:
                reply["kind"] = "index"
        write(json.dumps(reply) + "\n")


def _serve_run(programs, request):
    run = programs.get(request.get("run"))
    if run is None:
        return calling.Answer("failure", f"no program was built with id {request.get('run')}")
    try:
        buffers = {int(k): decode_buffer(v) for k, v in request["buffers"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as problem:
        return calling.Answer("failure", f"a run request with malformed buffers: {problem}")
    declared = {slot: (DTYPE_NAMES[a.dtype], a.shape) for slot, a in buffers.items()}
    return calling.call_run(run, buffers, declared)


def _is_single(value: float) -> bool:
    with np.errstate(over="ignore"):
        return math.isnan(value) or float(np.float32(value)) == value
