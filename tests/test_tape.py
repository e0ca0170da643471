"""The tape exercise (issue 8): the reference backprop, cross-checked against the IR's own
gradient and against finite differences; its rejections; the protocol's backprop request;
and the suite's detection of which protocol functions a module defines. SPEC.md, "Tapes"."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings

from gradient_conformance import reference
from gradient_conformance.conformance.transports.jsonlines import decode_tape, encode_tape, serve
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.generators.tapes import (
    invalid_tapes,
    order_sensitive_tapes,
    single_use_tapes,
    tape_cases,
    tapes,
)
from gradient_conformance.reference import exact
from gradient_conformance.reference.realvalued import Real
from gradient_conformance.reference.tape import (
    TapeError,
    backprop,
    backprop_bits,
    check,
    forward,
    leaf_values,
    load_tape_case,
    to_program,
)
from tests.conftest import CASES, suite


def test_the_lesson_figure():
    """(x * x) * x at x = 2: x receives 4 from the outer mul, then 4 and 4 from x * x."""
    tape = [["input", 2.0], ["mul", 0, 0], ["mul", 1, 0]]
    assert backprop(tape) == [12.0, 2.0, 1.0]
    entries = check(tape)
    from gradient_conformance.reference.tape import walk
    _, shares = walk(entries, forward(entries))
    assert [[exact.decode(b) for b in received] for received in shares] == \
        [[4.0, 4.0, 4.0], [2.0], [1.0]]


@given(case=single_use_tapes())
def test_a_tree_gives_the_bits_of_the_ir_program(case):
    """Every entry used once: the tape's derivatives are the IR gradients of the same ops,
    bit for bit (the two walks agree where no entry sums two shares)."""
    run = reference.build(to_program(case.tape))
    n = len(case.tape)
    out = run({0: exact.to_numpy_f32(leaf_values(case.tape)), 1: np.zeros(n, np.float32)})
    ir = [int(b) for b in out[1].view(np.uint32)]
    assert all(exact.same_f32(a, b) for a, b in zip(ir, backprop_bits(case.tape), strict=True))


@settings(max_examples=40)
@given(case=tapes(smooth=True, max_entries=7))
def test_the_reference_against_finite_differences(case):
    """Within 1e-4 relative (+1e-30) of 50-digit central differences wherever the f32
    derivative is finite and not cancelled down to nothing: f32 rounding, not a wrong rule."""
    entries = check(case.tape)
    domain = Real(50)
    base = forward(entries, domain)
    bits = backprop_bits(case.tape)
    for k in range(len(entries)):
        got = exact.decode(bits[k])
        v = base[k].value
        h = domain.mp.mpf("1e-20") * max(abs(v), domain.mp.mpf("1e-3"))
        up = forward(entries, domain, override={k: v + h})[-1].value
        down = forward(entries, domain, override={k: v - h})[-1].value
        truth = float((up - down) / (2 * h))
        if not math.isfinite(got) or abs(truth) > 1e30:
            continue
        scale = max(abs(truth), max(abs(float(s.value)) for s in base), 1.0)
        assert abs(got - truth) <= 1e-4 * scale + 1e-30, (k, got, truth, case.tape)


@given(case=order_sensitive_tapes())
def test_order_sensitive_tapes_are(case):
    """The input's shares give other bits summed in program order than in arrival order."""
    constants = [exact.encode(float(np.float32(e[1]))) for e in case.tape if e[0] == "const"]
    assert backprop_bits(case.tape)[0] == exact.f32_fold(constants[::-1])
    assert not exact.same_f32(exact.f32_fold(constants), exact.f32_fold(constants[::-1]))


@given(case=invalid_tapes())
def test_invalid_tapes_raise_a_tape_error_of_their_kind(case):
    with pytest.raises(TapeError) as raised:
        backprop(case.tape)
    assert raised.value.kind == case.expect_error
    assert "Traceback" not in str(raised.value) and str(raised.value)


@pytest.mark.parametrize("tape, message", [
    ([], "the tape is empty"),
    ("x", "a tape is a list of entries, not str"),
    ([["input", 1.0], ["add", 0, 1]], "entry 1: operand 1 is not an earlier entry"),
    ([["mul", 0, 0]], "entry 0: operand 0 is not an earlier entry"),
    ([["input", 1.0], ["pow", 0, 0]], "entry 1: unknown kind 'pow'"),
    ([["input", True]], "entry 0: the value True is not a number"),
    ([["const"]], "entry 0: const takes 1 value, not 0"),
])
def test_errors_name_the_entry_and_the_problem(tape, message):
    with pytest.raises(TapeError, match=message.replace("(", r"\(")):
        backprop(tape)


def test_values_are_rounded_once_to_f32():
    assert backprop_bits([["input", 0.1]]) == [exact.ONE]
    assert forward(check([["input", 0.1]]))[0].value == exact.f32_from_text("0.1")
    assert forward(check([["const", -0.0]]))[0].value == exact.NEG_ZERO
    assert forward(check([["const", 16777217]]))[0].value == exact.f32_from_text("16777216.0")


def test_the_wire_form_round_trips():
    tape = [["input", math.inf], ["const", -0.0], ["mul", 0, 1], ["input", math.nan]]
    wire = encode_tape(tape)
    assert wire[0] == ["input", 0x7F800000] and wire[1] == ["const", 0x80000000]
    back = decode_tape(json.loads(json.dumps(wire)))
    assert backprop_bits(back)[:3] == backprop_bits(tape)[:3]
    assert encode_tape([["input", "1.0"]]) == [["input", "1.0"]]  # an invalid value goes as is


def test_serve_answers_backprop():
    replies = []
    serve(reference, [json.dumps({"id": 1, "backprop": encode_tape([["input", 2.0],
                                                                     ["mul", 0, 0]])}),
                      json.dumps({"id": 2, "backprop": [["input", 1065353216], ["add", 0, 5]]})],
          replies.append)
    first, second = (json.loads(r) for r in replies)
    # The first reply also says what the module is (docs/adapters.md, "Adapters": a server says what
    # it is).
    assert first.pop("name") == reference.NAME and "build" in first.pop("functions")
    first.pop("version", None)
    first.pop("capabilities", None)
    assert first == {"id": 1, "ok": True, "derivatives": [exact.f32_from_text("4.0"), exact.ONE]}
    assert second["ok"] is False and "entry 1: operand 5" in second["error"]


def test_a_cmd_implementation_backprops():
    impl = load(f"cmd:{sys.executable} -m gradient_conformance serve reference")
    try:
        got = impl.run_backprop([["input", 3.0], ["mul", 0, 0], ["mul", 1, 0]])
        assert got.status == "ok" and [exact.decode(b) for b in got.derivatives] == \
            [27.0, 3.0, 1.0]
        assert impl.run_backprop([]).status == "rejected"
    finally:
        impl.close()


def test_derivatives_that_are_not_f32_values_are_a_failure(tmp_path):
    module = tmp_path / "double.py"
    module.write_text("def backprop(tape):\n    return [0.1] * len(tape)\n")
    got = load(str(module)).run_backprop([["input", 1.0]])
    assert got.status == "failure" and "not an f32 value" in got.message
    module.write_text("def backprop(tape):\n    return [1.0]\n")
    assert load(str(module)).run_backprop([["input", 1.0], ["add", 0, 0]]).status == "failure"


def _suite(impl: str, *select: str, **kw) -> tuple[int, str]:
    code, output, _ = suite(impl, "-q", "-rs", *select, **kw)
    return code, output


def test_a_backprop_only_module_skips_the_build_checks_with_the_reason():
    run = _suite("gradient_conformance.implementations.faults.tape_const_zero", "-k",
                 "test_case_file and calls or test_tape_case_file and lesson")
    code, output = run
    assert code == 0, output[-3000:]
    assert "defines no build(): these checks are for implementations that do" in output
    assert "1 passed" in output or "2 passed" in output


def test_a_build_only_module_skips_the_tape_checks_with_the_reason(tmp_path):
    module = tmp_path / "only_build.py"
    module.write_text("from gradient_conformance.implementations.fast import build, NAME, "
                      "VERSION, CAPABILITIES\n")
    code, output = _suite(str(module), "-k", "test_tape_case_file")
    assert code == 0, output[-3000:]
    assert "defines no backprop()" in output and "passed" not in output


def test_a_module_with_neither_is_a_usage_error(tmp_path):
    module = tmp_path / "nothing.py"
    module.write_text("NAME = 'nothing'\n")
    code, output = _suite(str(module))
    assert code == 2 and "defines neither build(source) nor backprop(tape)" in output


TAPE_FAULTS = ["tape_program_order", "tape_const_zero", "tape_same_operand_once"]
# The first tier's selection: the tape checks, or the one that kills and locates the fault
# where the first to kill it (a case file) leaves candidates.
KILLED_BY = {"tape_same_operand_once": "tapes_bit_for_bit"}


@pytest.mark.parametrize("fault", TAPE_FAULTS)
@pytest.mark.parametrize("tier", [pytest.param("-x", id="first-failure"),
                                  pytest.param("", id="every-check", marks=pytest.mark.slow)])
def test_every_tape_fault_is_killed_and_diagnosed_by_its_name(fault, tier, tmp_path):
    """With -x (the first tier: the first failing tape check's divergences) and over every
    tape check (the second): named by the fault's variant alone, and located."""
    select = KILLED_BY.get(fault, "tape") if tier else "tape"
    from tests.test_seeded_faults import DIAGNOSED_AS, assert_diagnosed_as, assert_located_at
    report = tmp_path / "r.json"
    # The ci profile, shrunk, as the seeded faults of programs run (test_seeded_faults.py).
    code, output = _suite(f"gradient_conformance.implementations.faults.{fault}", "-k", select,
                          f"--report-json={report}", *filter(None, [tier]), examples=None,
                          shrink=True)
    assert code == 1, output[-3000:]
    divergences = json.loads(report.read_text())["divergences"]
    assert_diagnosed_as(DIAGNOSED_AS[fault], divergences, output)
    assert_located_at(fault, divergences, output)


def test_the_bundled_implementation_passes_the_tape_checks():
    code, output = _suite("gradient_conformance.implementations.fast", "-k", "tape")
    assert code == 0, output[-3000:]
    # Every tape case file, the four generated tape checks and every enumerated tape.
    files, enumerated = len(list((CASES / "tapes").glob("*.json"))), len(tape_cases())
    assert f"{files + 4 + enumerated} passed" in output


def test_tape_case_files_are_well_formed():
    for path in sorted((CASES / "tapes").glob("*.json")):
        case = load_tape_case(path.read_text())
        assert case["description"], path
        if case["error"]:
            with pytest.raises(TapeError) as raised:
                backprop(case["tape"])
            assert raised.value.kind == case["error"], path
        else:
            assert backprop_bits(case["tape"]) == case["derivatives"], path


def test_the_reference_s_backprop_trace_names_each_share_and_its_sender():
    from gradient_conformance.reference.tape import backprop_trace
    trace = backprop_trace([["input", 2.0], ["input", 3.0], ["mul", 0, 1], ["add", 2, 0]])
    assert trace.splitlines() == [
        "3: ['add', 2, 0]  derivative 1.0 (0x3f800000) = 1.0 from the start",
        "2: ['mul', 0, 1]  derivative 1.0 (0x3f800000) = 1.0 from entry 3",
        "1: ['input', 3.0]  derivative 2.0 (0x40000000) = 2.0 from entry 2",
        "0: ['input', 2.0]  derivative 4.0 (0x40800000) = 1.0 from entry 3 + 3.0 from entry 2"]
    unused = backprop_trace([["input", 2.0], ["input", 3.0], ["mul", 0, 0]])
    assert "1: ['input', 3.0]  derivative 0.0 (0x00000000): receives no share" in unused


def test_a_tape_divergence_is_told_in_the_tape_s_words(tmp_path):
    """Entries and derivatives, not slots and statements, with the reference's backprop
    beside them; in the terminal and in the HTML report."""
    report = tmp_path / "r.html"
    code, output, _ = suite("gradient_conformance.implementations.faults.tape_program_order",
                            "-k", "arrival_order.json", f"--report={report}", cwd=tmp_path)
    assert code == 1, output[-3000:]
    assert "--- the tape (the entry marked > is the first whose derivative differs) ---" \
        in output and "> 0: ['input', 1.0]" in output
    assert "--- differing derivatives ---\nentry 0: expected 1.0 (0x3f800000), got 0.0" \
        in output
    assert "--- the reference's backprop, from the last entry" in output
    assert "0: ['input', 1.0]  derivative 1.0 (0x3f800000) = -1e+08 from entry 6 + 1e+08 " \
        "from entry 4 + 1.0 from entry 2" in output
    assert "slot 0" not in output and "--- the program" not in output
    html = report.read_text()
    assert "<h4>Tape (9 entries)</h4>" in html and "<td>entry 0</td>" in html
    assert "The reference&#39;s backprop, from the last entry" in html or \
        "The reference's backprop, from the last entry" in html


def test_a_programming_error_from_backprop_is_a_crash_not_a_rejection(tmp_path):
    """As from build (SPEC.md, "Tapes"): a backprop that raises KeyError for every tape
    passed the six rejection case files before (issue 56's class, graded)."""
    module = tmp_path / "todo.py"
    module.write_text("def backprop(tape):\n    raise KeyError('todo')\n")
    declared = tmp_path / "declared.py"
    declared.write_text("CAPABILITIES = {'rejection': ['KeyError']}\n"
                        "def backprop(tape):\n    raise KeyError('todo')\n")
    for spec, status in ((module, "failure"), (declared, "rejected")):
        impl = load(str(spec), in_process=True)
        try:
            got = impl.run_backprop([])
        finally:
            impl.close()
        assert got.status == status, (spec.name, got)
