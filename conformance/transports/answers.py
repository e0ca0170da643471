"""An implementation's answers as the suite's Outcomes (conformance/outcome.py): its words
made safe to show and store, a tape's derivatives read as f32. The suite's side of every
transport; calling.py, which also runs in the implementation's process, knows no Outcome."""

from __future__ import annotations

import math

import numpy as np

from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.transports.calling import Answer, bounded
from gradient_conformance.reports.records import visible


def answered(answer_status: str, message: str = "", reason: str = "", index: bool = False,
             **values) -> Outcome:
    """An Outcome whose words came from the implementation: made safe to show and store."""
    return Outcome(answer_status, message=visible(bounded(message)), reason=reason,
                   index=index, **values)


def derivatives(floats: list[float], entries: int) -> Outcome:
    """A tape's derivatives as f32 bits, or a failure: one number per entry, each an f32."""
    if len(floats) != entries:
        return answered("failure", f"backprop returned {len(floats)} derivatives for "
                        f"{entries} entries", "junk")
    bits = []
    for k, value in enumerate(floats):
        single = np.float32(value)
        if not (float(single) == value or (math.isnan(value) and np.isnan(single))):
            return answered("failure", f"derivative {k} is {value!r}, which is not an f32 "
                            "value: computed in another precision?", "junk")
        bits.append(int(single.view(np.uint32)))
    return Outcome("ok", derivatives=bits)


def from_answer(answer: Answer) -> Outcome:
    if answer.status == "ok":
        return Outcome("ok", buffers=answer.value if isinstance(answer.value, dict) else {})
    return answered(answer.status, answer.message, answer.reason, answer.index)
