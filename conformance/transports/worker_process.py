"""The process a Python implementation runs in, apart from the suite: `python -m
gradient_conformance.conformance.transports.worker_process`. docs/isolation.md, "Isolation".

The suite (worker.py, `Worker`) starts it, says which module to load,
and then sends one case at a time: build and run, or backprop. The oracle, Hypothesis and
the suite's own numpy live in the suite's process, out of the implementation's reach; so do
the deadlines, which the suite enforces by killing this process.

The channel is the process's stdin and stdout as they were at start, moved to other file
descriptors: the implementation's prints go to stderr, which the suite keeps a bounded tail
of. Each message is a frame: the lengths of a JSON header and of a binary payload (`FRAME`),
then both. Arrays travel in the payload as their raw bytes, row-major, in the order the
header lists them.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from typing import cast

FRAME = struct.Struct(">IQ")  # header bytes, payload bytes


def frame(header: dict, payload: bytes = b"") -> bytes:
    body = json.dumps(header).encode()
    return FRAME.pack(len(body), len(payload)) + body + payload


def pack(arrays: dict) -> tuple[list, bytes]:
    """(the header's list of [slot, dtype, shape], the payload) for arrays of IR dtypes."""
    listed, chunks = [], []
    for slot, array in sorted(arrays.items()):
        listed.append([slot, array.dtype.str, list(array.shape)])
        chunks.append(array.tobytes())
    return listed, b"".join(chunks)


def _read(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int) -> tuple[dict, bytes]:
    header_size, payload_size = FRAME.unpack(_read(fd, FRAME.size))
    return json.loads(_read(fd, header_size)), _read(fd, payload_size)


def _send(fd: int, header: dict, payload: bytes = b"") -> None:
    data = memoryview(frame(header, payload))
    while data:
        data = data[os.write(fd, data):]


def _hello(request: dict):
    """Load the module; reply with what it says of itself."""
    from gradient_conformance.conformance.transports.calling import LoadFailed, load_module
    from gradient_conformance.conformance.transports.description import describe_module
    sys.path[:0] = [p for p in request["path"] if p not in sys.path]
    try:
        module = load_module(request["spec"], request["base"])
    except LoadFailed as problem:
        return None, {"ok": False, "error": str(problem)}
    return module, {"ok": True, **describe_module(module)}


def _case(module, request: dict, payload: bytes) -> tuple[dict, bytes]:
    import numpy as np

    from gradient_conformance.conformance.transports.calling import Answer, call_build, call_run
    answer = call_build(module, request["source"])
    if answer.status == "ok" and request.get("run"):
        buffers, offset = {}, 0
        for slot, dtype, shape in request["buffers"]:
            array = np.frombuffer(payload, dtype=np.dtype(dtype), offset=offset,
                                  count=int(np.prod(shape, dtype=np.int64)))
            offset += array.nbytes
            buffers[slot] = array.reshape(shape).copy()
        declared = {slot: (dtype, tuple(shape)) for slot, dtype, shape in request["declared"]}
        answer = call_run(answer.value, buffers, declared)
    elif answer.status == "ok":
        answer = Answer("ok")
    reply = {"status": answer.status, "message": answer.message, "reason": answer.reason,
             "index": answer.index}
    if answer.status == "ok" and isinstance(answer.value, dict):
        reply["outputs"], data = pack(answer.value)
        return reply, data
    return reply, b""


def _backprop(module, request: dict) -> tuple[dict, bytes]:
    import numpy as np

    from gradient_conformance.conformance.transports.calling import call_backprop
    answer = call_backprop(module, request["tape"])
    reply: dict[str, object] = {"status": answer.status, "message": answer.message,
                                "reason": answer.reason}
    if answer.status == "ok":
        reply["count"] = len(cast(list, answer.value))  # an ok backprop's: its derivatives
        return reply, np.array(answer.value, dtype="<f8").tobytes()
    return reply, b""


def main() -> int:
    channel_in, channel_out = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)  # what the implementation prints goes where the suite keeps a tail of it
    module = None
    while True:
        try:
            request, payload = _receive(channel_in)
        except EOFError:
            return 0
        op = request.get("op")
        if op == "hello":
            module, reply = _hello(request)
            _send(channel_out, reply)
        elif op == "case":
            _send(channel_out, *_case(module, request, payload))
        elif op == "backprop":
            _send(channel_out, *_backprop(module, request))
        else:
            _send(channel_out, {"status": "failure", "message": f"unknown request {op!r}"})


if __name__ == "__main__":
    sys.exit(main())
