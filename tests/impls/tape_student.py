"""A student's backprop for the tape exercise (SPEC.md, "Tapes"), in f32 with numpy, with
one of three faults that the hidden tapes of issue 55 had and the ci profile let through:
`depth_first`, micrograd's order (the reverse of a depth-first post-order from the last
entry); `numpy_sum`, eight or more shares to an entry summed by numpy (pairwise); and
`zero_passes_nothing`, an entry whose derivative is +-0.0 passing nothing on. The modules
tape_depth_first.py, tape_numpy_sum.py and tape_zero_passes_nothing.py pick one. A tape is
validated by the reference's own check, so that only the fault departs from the spec."""

import numpy as np

from gradient_conformance.reference.tape import check

F32 = np.float32


def _values(tape):
    values = []
    for entry in tape:
        if entry[0] in ("input", "const"):
            values.append(F32(entry[1]))
        else:
            a, b = values[entry[1]], values[entry[2]]
            values.append(F32(a + b) if entry[0] == "add" else F32(a * b))
    return values


def _depth_first(tape):
    finished, seen, stack = [], set(), [(len(tape) - 1, False)]
    while stack:
        k, done = stack.pop()
        if done:
            finished.append(k)
        elif k not in seen:
            seen.add(k)
            stack.append((k, True))
            if tape[k][0] in ("add", "mul"):
                stack += [(tape[k][2], False), (tape[k][1], False)]
    return finished[::-1]


def backprop_with(tape, fault):
    with np.errstate(all="ignore"):  # IEEE's infinities and NaN are the tape's values too
        return _backprop(tape, fault)


def _backprop(tape, fault):
    check(tape)  # the reference's own validation: only the fault differs from the spec
    values = _values(tape)
    shares = [[] for _ in tape]
    shares[-1].append(F32(1.0))
    derivatives = [F32(0.0)] * len(tape)
    order = _depth_first(tape) if fault == "depth_first" else range(len(tape) - 1, -1, -1)
    for k in order:
        if not shares[k]:
            continue
        if fault == "numpy_sum" and len(shares[k]) >= 8:
            g = np.sum(np.array(shares[k], F32), dtype=F32)
        else:
            g = shares[k][0]
            for share in shares[k][1:]:
                g = F32(g + share)
        derivatives[k] = g
        if tape[k][0] in ("input", "const") or (fault == "zero_passes_nothing" and g == 0):
            continue
        i, j = tape[k][1], tape[k][2]
        if tape[k][0] == "add":
            shares[i].append(g)
            shares[j].append(g)
        else:
            shares[i].append(F32(g * values[j]))
            shares[j].append(F32(g * values[i]))
    return [float(d) for d in derivatives]
