"""What the sentence tests share (issue 53, "a variant's code against its own sentence"): a
program of scalar or small inputs, run by the reference under a variant and under the spec,
and compared bit for bit with what the variant's sentence says, worked out by the test
without the variant's code."""

from __future__ import annotations

import numpy as np

from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.reference.cases import buffer_slots
from gradient_conformance.reference.interp import NUMPY_DTYPES

F32 = np.float32
REJECTED = "rejected"  # what a sentence says of a program it rejects
ACCEPTED = "accepted"  # what a sentence says of a program it accepts, giving no value


def program(inputs: list[tuple[str, str, str]], body: str, out: tuple[str, str],
            stored: str | None) -> str:
    """Buffers for `inputs` (name, dtype, shape) in slots 0, 1, ..., each loaded as %name,
    then `body`, then `stored` stored to one more buffer %o of `out` (dtype, shape); with
    `stored` None, the body stores to %o itself."""
    lines = []
    for slot, (name, dtype, shape) in enumerate(inputs):
        lines.append(f"%{name}_buffer = buffer slot={slot} dtype={dtype} shape={shape}")
    lines.append(f"%o = buffer slot={len(inputs)} dtype={out[0]} shape={out[1]}")
    lines += [f"%{name} = load %{name}_buffer" for name, _, _ in inputs]
    lines += [line.strip() for line in body.strip().splitlines()]
    if stored is not None:
        lines.append(f"store %o {stored}")
    return "\n".join(lines) + "\n"


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal bits, any NaN equal to any NaN (a sentence does not give NaN payloads)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype != np.float32:
        return got.tobytes() == want.tobytes()
    nan = np.isnan(got) & np.isnan(want)
    return bool(((got.view(np.uint32) == want.view(np.uint32)) | nan).all())


def shows(name: str, source: str, values: list, want) -> None:
    """Under variant `name`, `source` on `values` (one array per input buffer) gives `want`
    in its last slot (an array, or REJECTED, or ACCEPTED), and the spec gives otherwise."""
    reading = Reading(source)
    # slot order is declaration order in `program`'s sources; the last is stored to
    declared = [(NUMPY_DTYPES[dtype], shape) for _, (dtype, shape) in
                sorted(buffer_slots(source).items())]
    arrays = [np.asarray(v, dtype).reshape(shape) for v, (dtype, shape) in
              zip(values, declared, strict=False)]
    out_dtype, out_shape = declared[-1]
    buffers = {slot: array for slot, array in enumerate(arrays)}
    buffers[len(arrays)] = np.zeros(out_shape, out_dtype)
    theirs = reading.outcome(buffers, CATALOGUE[name].semantics())
    spec = reading.outcome(buffers)
    if isinstance(want, str):
        assert (theirs.status == "rejected") == (want == REJECTED), (name, theirs)
        assert theirs.status != spec.status, (name, "the spec does the same", spec)
        return
    want = np.asarray(want, out_dtype).reshape(out_shape)
    assert theirs.status == "ok", (name, theirs)
    got = theirs.buffers[len(arrays)]
    assert same_bits(got, want), (name, got, want)
    assert spec.status != "ok" or not same_bits(spec.buffers[len(arrays)], want), \
        (name, "the spec gives the same", spec)


def fold(values, order=None) -> F32:
    """A left fold of `values` (taken in `order`, a list of indices) in f32."""
    values = [F32(v) for v in values]
    if order is not None:
        values = [values[k] for k in order]
    total = values[0]
    for value in values[1:]:
        total = F32(total + value)
    return total


def f32_of(bits: int) -> F32:
    """The f32 whose bits are `bits`."""
    return np.array([bits], np.uint32).view(F32)[0]


def pairwise(values) -> F32:
    """(s1 + s2) + (s3 + s4), ...: adjacent pairs, then pairs of those (a power of two), in
    f32."""
    level = [F32(v) for v in values]
    while len(level) > 1:
        level = [F32(level[k] + level[k + 1]) for k in range(0, len(level), 2)]
    return level[0]
