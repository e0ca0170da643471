"""`reference.build` as impl-protocol.md defines it: reject at build, run many times without
state, leave its inputs alone, and refuse wrong buffers with a clear RunError."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gradient_conformance import reference
from gradient_conformance.reference.errors import RunError

SOURCE = ("%a = buffer slot=0 dtype=f32 shape=[2]\n%o = buffer slot=1 dtype=f32 shape=[2]\n"
          "%x = load %a\n%y = mul %x %x\n%s = reduce %y op=add\n%g = gradient %s %x\n"
          "store %o %g\nstore %a %y\n")


def test_run_is_repeatable_and_leaves_inputs_alone():
    run = reference.build(SOURCE)
    inputs = {0: np.array([1.5, -2.0], np.float32), 1: np.zeros(2, np.float32)}
    first = run(inputs)
    second = run(inputs)
    assert inputs[0].tolist() == [1.5, -2.0]
    assert first[1].tolist() == second[1].tolist() == [3.0, -4.0]
    assert first[0].tolist() == [2.25, 4.0]  # the program stored into its input slot
    assert first[0].dtype == np.float32 and first[1].shape == (2,)


@pytest.mark.parametrize(("buffers", "message"), [
    ({0: np.zeros(2, np.float32)}, "no initial contents for slot 1"),
    ({0: np.zeros(3, np.float32), 1: np.zeros(2, np.float32)}, "slot 0 is f32[2]"),
    ({0: np.zeros(2, np.float64), 1: np.zeros(2, np.float32)}, "slot 0 is f32[2]"),
    ({0: np.zeros(2, np.float32), 1: np.zeros(2, np.float32), 7: np.zeros(1)}, "slot 7"),
])
def test_wrong_buffers_are_a_clear_run_error(buffers, message):
    with pytest.raises(RunError, match=re.escape(message)):
        reference.build(SOURCE)(buffers)


def test_capabilities_claim_everything():
    assert reference.CAPABILITIES["unsupported"] == []
    assert reference.CAPABILITIES["bit_exact_gradients"] is True


def test_the_implementation_s_process_knows_the_programming_errors_the_reference_names():
    """calling.py runs beside the implementation and imports nothing of the package, so it
    writes the list of Python's programming errors out; the kit reads reference/errors.py's."""
    from gradient_conformance.conformance.transports.calling import CRASHES
    from gradient_conformance.reference.errors import PROGRAMMING_ERRORS
    assert CRASHES == PROGRAMMING_ERRORS
