"""The reference over the JSON-lines protocol: `python -m reference serve`. SPEC.md, "The
protocol".

One request a line on stdin, one reply a line on stdout:

    {"id": 1, "build": "<program text>"}        -> {"id": 1, "ok": true}
                                                    or {"id": 1, "ok": false, "error": "..."}
    {"id": 2, "run": 1, "buffers": {...}}        -> {"id": 2, "ok": true, "buffers": {...}}
                                                    or {"id": 2, "ok": false, "error": "...",
                                                        "kind": "index"}

A buffer is {"dtype": "f32"|"i32"|"bool", "shape": [...], "bits": [...]}: the raw 32-bit
pattern of each element, row-major, as an unsigned integer (bools as 0 or 1). A failed run
says `"kind": "index"` when an index was out of range, the one run-time failure a valid
program may have.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from . import build
from .errors import IRError, RunError
from .interp import NUMPY_DTYPES

DTYPE_NAMES = {np.dtype(numpy): name for name, numpy in NUMPY_DTYPES.items()}


def encode_buffer(array: np.ndarray) -> dict:
    """A numpy array as the protocol's buffer: dtype, shape, and raw 32-bit patterns."""
    array = np.asarray(array)
    dtype = DTYPE_NAMES[array.dtype]
    if dtype == "bool":
        bits = array.astype(np.uint32)
    else:
        bits = array.view(np.uint32)
    return {"dtype": dtype, "shape": list(array.shape), "bits": [int(b) for b in bits.ravel()]}


def decode_buffer(value: dict) -> np.ndarray:
    """The protocol's buffer as a numpy array; signed patterns are read modulo 2**32."""
    dtype, shape = value["dtype"], tuple(value["shape"])
    bits = np.array([int(b) & 0xFFFFFFFF for b in value["bits"]], dtype=np.uint64)
    bits = bits.astype(np.uint32).reshape(shape)
    if dtype == "bool":
        return bits.astype(np.bool_)
    return bits.view(NUMPY_DTYPES[dtype]).copy()


def serve(lines, write) -> None:
    """Answer each request line with one reply line, until the input ends."""
    programs = {}
    for line in lines:
        if not line.strip():
            continue
        request = json.loads(line)
        reply = {"id": request.get("id")}
        try:
            if "build" in request:
                programs[request["id"]] = build(request["build"])
                reply["ok"] = True
            else:
                run = programs[request["run"]]
                final = run({int(k): decode_buffer(v) for k, v in request["buffers"].items()})
                reply.update(ok=True, buffers={str(k): encode_buffer(v) for k, v in final.items()})
        except RunError as problem:
            reply.update(ok=False, error=str(problem), kind="index" if "out of range" in
                         problem.message else "run")
        except IRError as problem:
            reply.update(ok=False, error=str(problem))
        write(json.dumps(reply) + "\n")


def main() -> int:
    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    serve(sys.stdin, write)
    return 0
