"""`--impl=cmd:'PROGRAM ARGS'`: an implementation in any language, over JSON lines. SPEC.md,
"The protocol".

    -> {"id": 1, "build": "<program text>"}
    <- {"id": 1, "ok": true}                      or {"id": 1, "ok": false, "error": "..."}
    -> {"id": 2, "run": 1, "buffers": {"0": {"dtype": "f32", "shape": [5], "bits": [...]}}}
    <- {"id": 2, "ok": true, "buffers": {...}}    or {"id": 2, "ok": false, "error": "...",
                                                      "kind": "index"}
    -> {"id": 3, "backprop": [["input", 1073741824], ["mul", 0, 0]]}
    <- {"id": 3, "ok": true, "derivatives": [...]} or {"id": 3, "ok": false, "error": "..."}

Here are the codec (buffers and tape leaves as raw 32-bit patterns) and `serve`, the server
loop `gradient-conformance serve MODULE` runs for any Python module. The client is in
command.py. This module imports nothing of the suite but calling.py and description.py, so
that a module can be served from a venv with none of the suite's dependencies but numpy (an
old framework's own, as MXNet's: docs/adapters.md, "Adapters").
"""

from __future__ import annotations

import json
import math
import struct
from typing import cast

import numpy as np

from gradient_conformance.conformance.transports import calling
from gradient_conformance.conformance.transports.calling import DTYPE_STRINGS
from gradient_conformance.conformance.transports.description import describe_module

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
    if not isinstance(shape, list) or not all(whole(n) and n >= 0 for n in shape):
        raise ValueError("a buffer's shape is a list of non-negative integers")
    if not isinstance(bits, list) or len(bits) != math.prod(shape) or not all(
            whole(b) and -2**31 <= b < 2**32 for b in bits):
        raise ValueError(f"a buffer of shape {shape} has {math.prod(shape)} bit patterns, "
                         "each an integer in [-2^31, 2^32)")
    patterns = np.array([b & 0xFFFFFFFF for b in bits], dtype=np.uint64).astype(np.uint32)
    patterns = patterns.reshape(shape)
    if value["dtype"] == "bool":
        return patterns.astype(np.bool_)
    return patterns.view(DTYPE_STRINGS[value["dtype"]]).copy()


def whole(n) -> bool:
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
                whole(entry[1]):
            if 0 <= entry[1] < 2**32:
                out.append([entry[0], struct.unpack("<f", struct.pack("<I", entry[1]))[0]])
            else:
                out.append([entry[0], str(entry[1])])  # no bit pattern: an invalid value
        else:
            out.append(entry)
    return out


# --- the server ----------------------------------------------------------------------------

KEPT_BUILDS = 64  # a server keeps the programs of its latest builds


# Complex on purpose: one branch per request and status of the protocol, read top to bottom as
# impl-protocol.md lists them.
def serve(module, lines, write) -> None:  # noqa: C901
    """Answer each request line with one reply line, until the input ends, calling
    `module` as conformance/transports/calling.py does: its statuses are the suite's."""
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
                derivatives = cast(list, answer.value)  # an ok backprop's (calling.py)
                bits = [struct.unpack("<I", struct.pack("<f", v))[0] for v in derivatives
                        if _is_single(v)]
                if len(bits) == len(derivatives):
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
