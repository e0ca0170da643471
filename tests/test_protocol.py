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


def test_a_crash_is_placed_at_the_implementation_s_own_line(tmp_path, monkeypatch):
    """Issue 53, from a student's draft: a bitcast bug in their code was placed at numpy's
    `_stride_tricks_impl.py`. The place of a crash is the innermost line of the
    implementation's own code, which crash causes group by; the line that raised is said
    before it."""
    import importlib
    import sys

    import numpy as np

    from gradient_conformance.conformance.transports.calling import describe
    from gradient_conformance.reports.records import _RAISED
    (tmp_path / "student_draft.py").write_text(
        "import numpy as np\n\n\ndef spread(a):\n    return np.broadcast_to(a, (2, 3))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    draft = importlib.import_module("student_draft")
    try:
        draft.spread(np.zeros(4))
    except ValueError as problem:
        said = describe(problem)
    sys.modules.pop("student_draft", None)
    found = _RAISED.fullmatch(said)
    assert found and found.group(3) == f"{tmp_path / 'student_draft.py'}:5", said
    assert "(raised in " in said and "numpy" in said.split("(raised in ")[1], said
