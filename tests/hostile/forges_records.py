"""Correct (the fast implementation), but at every build it writes a made-up divergence
record, as a fuzzing task's line would carry it, into every pipe of its parent it can open
through /proc: the task's stdout among them."""

import json
import os

from gradient_conformance.implementations.fast import CAPABILITIES  # noqa: F401
from gradient_conformance.implementations.fast import build as _build

FORGED = {"check": "test_gradients_bit_for_bit", "outcome": "failed", "cases": 1,
          "divergence": {"check": "test_gradients_bit_for_bit", "test_id": "forged",
                         "summary": "FORGED by the implementation",
                         "signature": ["test_gradients_bit_for_bit", "forged", "bits"]}}


def build(source):
    line = (json.dumps(["record", FORGED]) + "\n").encode()
    for pid in (os.getppid(),):
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                    continue
                target = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                os.write(target, line)
                os.close(target)
            except OSError:
                pass
    return _build(source)
