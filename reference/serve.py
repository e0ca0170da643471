"""The reference over the JSON-lines protocol: `python -m reference serve`. SPEC.md, "The
protocol".

One request a line on stdin, one reply a line on stdout:

    {"id": 1, "build": "<program text>"}        -> {"id": 1, "ok": true}
                                                    or {"id": 1, "ok": false, "error": "..."}
    {"id": 2, "run": 1, "buffers": {...}}        -> {"id": 2, "ok": true, "buffers": {...}}
                                                    or {"id": 2, "ok": false, "error": "...",
                                                        "kind": "index"}

    {"id": 3, "backprop": [["input", 1073741824], ["mul", 0, 0]]}
                                                 -> {"id": 3, "ok": true, "derivatives": [...]}
                                                    or {"id": 3, "ok": false, "error": "..."}

A buffer is {"dtype": "f32"|"i32"|"bool", "shape": [...], "bits": [...]}: the raw 32-bit
pattern of each element, row-major, as an unsigned integer (bools as 0 or 1). A failed run
says `"kind": "index"` when an index was out of range, the one run-time failure a valid
program may have. On a tape, an input's or a const's value is its f32 bit pattern, an
integer in [0, 2^32); the derivatives come back as bit patterns too (SPEC.md, "Tapes").
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np

from . import build, exact
from .errors import IRError, RunError
from .interp import NUMPY_DTYPES
from .tape import LEAVES, backprop_bits, value_bits

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


def encode_tape(tape) -> list:
    """A tape for the wire: each leaf's value as its f32 bits. A value that is no number
    (an invalid tape's) goes as it is, and the far side must reject it."""
    out = []
    for entry in tape:
        if isinstance(entry, list | tuple) and len(entry) == 2 and entry[0] in LEAVES and \
                isinstance(entry[1], int | float) and not isinstance(entry[1], bool):
            out.append([entry[0], value_bits(0, entry[1])])
        else:
            out.append(list(entry) if isinstance(entry, list | tuple) else entry)
    return out


def decode_tape(wire) -> list:
    """A tape from the wire: leaf bits back to f32 values; anything else as it came, for
    `check` to judge."""
    out = []
    for entry in wire if isinstance(wire, list) else [wire]:
        if isinstance(entry, list) and len(entry) == 2 and entry[0] in LEAVES and \
                isinstance(entry[1], int) and not isinstance(entry[1], bool):
            if not 0 <= entry[1] < 2**32:
                out.append([entry[0], str(entry[1])])  # not a bit pattern: an invalid value
            else:
                out.append([entry[0], exact.decode(entry[1]) if not exact.is_nan(entry[1])
                            else math.nan])
        else:
            out.append(entry)
    return out if isinstance(wire, list) else wire


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
            elif "backprop" in request:
                reply.update(ok=True, derivatives=backprop_bits(decode_tape(request["backprop"])))
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
