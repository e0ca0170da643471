"""Location: the statement where an implementation departs, found by probes through the same
protocol. docs/diagnosis.md, "Diagnosis" (Location). The implementations here are variants of the
spec
(their departure known by construction) and a few hostile ones."""

from __future__ import annotations

import pytest

from gradient_conformance.conformance.casefiles import case_file_buffers
from gradient_conformance.conformance.diagnosis import locate as locating
from gradient_conformance.conformance.diagnosis.diagnose import diagnose_case
from gradient_conformance.conformance.diagnosis.locate import MAX_PROBES, locate, locate_tape
from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.reference import cases
from gradient_conformance.reference.tape import backprop_bits
from tests.conftest import CASES, ROOT


def _located(spec: str, case_file: str, *, guess: bool = True, **kwargs):
    """Where `spec` departs on a case file, as the explanation stage locates it: with the
    variants that diagnosis found to reproduce every output (none, without `guess`)."""
    impl = load(spec, in_process=True)
    try:
        case = cases.load_case(CASES / case_file)
        reading = Reading(case.source)
        buffers = case_file_buffers(case, reading.slots)
        want = reading.outcome(buffers)
        got = impl.run_case(case.source, buffers, reading.slots)
        if guess and "variants" not in kwargs:
            kwargs["variants"] = diagnose_case(reading, buffers, want, got,
                                               ulps=kwargs.get("ulps", 0)).variants
        return locate(impl, reading, buffers, want, got, **kwargs)
    finally:
        impl.close()


@pytest.mark.parametrize(("variant", "case_file", "kind", "line", "op"), [
    ("recip-form", "gradient/op_form_recip.ir", "share", 8, "recip"),
    ("reversed-arrival", "gradient/arrival_not_reversed.ir", "fold", 11, "load"),
    ("detach-passes", "examples/lesson_detach.ir", "blocked", 7, "detach"),
    ("flush-results", "ops/subnormals_kept.ir", "value", 12, "mul"),
    ("pairwise-reduce", "ops/reduce_not_pairwise.ir", "value", 9, "reduce"),
    ("scopes-kept-apart", "gradient/range_body_shares_outer_nodes.ir", "loop", 12, "range"),
    ("signed-zero-literals-merged", "ops/signed_zero_literals.ir", "value", 12, "add"),
    ("max-tie-first", "examples/max_tie.ir", "share", 12, "max"),
])
def test_a_variant_is_located_where_it_departs(variant, case_file, kind, line, op):
    where = _located(f"variant:{variant}", case_file)
    assert (where.kind, where.line, where.op) == (kind, line, op), where.text()
    assert where.text().startswith(f"location: line {line}, `")
    assert where.runs <= 2 and where.probes <= 2 * MAX_PROBES
    assert where.decided_by and f"Decided by: {where.decided_by[0]}" in where.text()
    if where.runs == 0:  # what decided it without a probe says so
        assert all(not phrase.startswith(("a forward probe", "forward probes", "adjoint"))
                   for phrase in where.decided_by), where.decided_by


def test_a_location_says_which_probes_decided_it():
    """docs/diagnosis.md, "Diagnosis" (Location): the answers that decided it, in order,
    each true of the run: the statement's probe differs, its operands' agree; in a
    gradient, the adjoints before the first differing one agree; a variant's narrowing."""
    where = _located("variant:flush-results", "ops/subnormals_kept.ir")
    assert where.decided_by == ["a forward probe of %sq: differs",
                                "forward probes of %x: agree"], where.decided_by
    where = _located("variant:reversed-arrival", "gradient/arrival_not_reversed.ir")
    assert where.decided_by[0] == "a forward probe of %g: differs", where.decided_by
    assert any(p.startswith("adjoint probes (`gradient %y u`) of ") and p.endswith(": agree")
               for p in where.decided_by), where.decided_by
    assert "which change only this one of the 5 places" in where.decided_by[-1]
    where = _located("variant:recip-form", "gradient/op_form_recip.ir", guess=False)
    assert where.decided_by[-1] == "it is the one place that could give it", where.decided_by


def test_a_missed_rejection_is_located_at_its_gradient():
    where = _located("variant:without-x-literal", "examples/lesson_literal_x.ir",
                     rule="x-literal")
    assert where.kind == "rejection" and where.op == "gradient" and where.runs == 0


def _reference_running(tmp_path, name: str, *body: str) -> str:
    """A module of the reference whose run does `body` (given `source`, `buffers` and the
    reference's `run`) and returns `out`."""
    module = tmp_path / f"{name}.py"
    module.write_text(
        "import numpy as np\nfrom gradient_conformance import reference\n"
        "def build(source):\n    run = reference.build(source)\n"
        "    def running(buffers):\n"
        + "".join(f"        {line}\n" for line in body)
        + "        return out\n    return running\n")
    return str(module)


def test_an_unwritten_slot_is_located_at_its_buffer(tmp_path):
    module = _reference_running(tmp_path, "changes_inputs", "out = run(buffers)",
                                "out[0] = out[0] + np.float32(1)")
    where = _located(module, "gradient/op_form_recip.ir")
    assert (where.kind, where.line, where.op) == ("unwritten", 5, "buffer"), where.text()


def test_a_probe_program_refused_explains_and_changes_nothing(tmp_path):
    """An implementation that rejects any program with more slots than it was first shown:
    the location says so; the verdict was made before, from the case alone."""
    module = tmp_path / "refuses_probes.py"
    module.write_text(
        "from gradient_conformance.conformance.diagnosis.variants import implementation\n"
        "_variant = implementation('recip-form')\n"
        "def build(source):\n    if '%__probe' in source:\n"
        "        raise ValueError('no probes here')\n    return _variant.build(source)\n")
    where = _located(str(module), "gradient/op_form_recip.ir")
    assert not where.line and "did not run the probe program" in where.reason
    assert "no probes here" in where.reason


def test_probes_are_bounded(monkeypatch):
    """A cone of more named values than MAX_PROBES is probed up to the bound."""
    monkeypatch.setattr(locating, "MAX_PROBES", 3)
    where = _located("variant:flush-results", "ops/subnormals_kept.ir")
    assert where.probes <= 3


def test_a_failure_or_a_status_is_not_probed():
    reading = Reading((CASES / "gradient" / "op_form_recip.ir").read_text())
    crashed = locate(None, reading, {}, Outcome("ok"), Outcome("failure", reason="crash"))
    rejected = locate(None, reading, {}, Outcome("run-error", index=True),
                      Outcome("rejected", message="no"))
    assert not crashed.line and "misbehaved" in crashed.reason
    assert not rejected.line and "a status" in rejected.reason


def test_two_places_a_variant_each_explains_are_listed_as_candidates():
    """Without hash consing, and with one share to an operand used twice, give the same
    bits here: the two places each is about are listed, neither named."""
    where = _located("variant:no-hash-consing", "gradient/hash_consing_shares.ir")
    assert where.kind == "candidates" and not where.line, where.text()
    assert set(where.candidates) == {8, 10}, where.text()
    assert "each is what one of the variants reproducing every output" in where.text()


def test_a_tape_is_located_without_probes():
    tape = [["input", 2.0], ["input", 3.0], ["mul", 0, 1], ["add", 2, 0]]
    want = backprop_bits(tape)
    got = list(want)
    got[0] ^= 1  # entry 0 receives the shares of entries 2 and 3: their sum is wrong
    where = locate_tape(tape, Outcome("ok", derivatives=want), Outcome("ok", derivatives=got))
    assert where.kind == "candidates" and where.runs == 0, where.text()
    assert where.candidates == [1, 3, 4, 1], where.text()
    where = locate_tape(tape, Outcome("ok", derivatives=want), Outcome("ok", derivatives=got),
                        ["tape-right-fold"])
    assert (where.kind, where.line) == ("sum", 1), where.text()
    assert where.decided_by[0].startswith("no probe: the derivatives the implementation gave")
    assert "([tape-right-fold]), which changes only this one of" in where.decided_by[1]
    program = [["input", 2.0], ["add", 0, 0], ["mul", 1, 0]]
    want = backprop_bits(program)
    got = list(want)
    got[1] ^= 1  # entry 1, no leaf, has one user: the share entry 2 sends it
    where = locate_tape(program, Outcome("ok", derivatives=want), Outcome("ok",
                                                                         derivatives=got))
    assert (where.kind, where.line, where.op) == ("share", 3, "mul"), where.text()


def test_an_i32_slot_is_located_too(tmp_path):
    module = tmp_path / "wrong_idiv.py"
    module.write_text(
        "from gradient_conformance.conformance.diagnosis.variants import implementation\n"
        "build = implementation('idiv-floors').build\n")
    where = _located(str(module), "ops/i32_c_semantics.ir")
    assert where.kind == "value" and where.op == "idiv", where.text()


def test_a_valid_program_refused_is_located_at_the_statement_it_starts_to_be(tmp_path):
    """A rejection of a valid program, or a run-time error where the spec runs: the shortest
    prefix the implementation refuses the same way, found by bisection."""
    module = tmp_path / "no_max.py"
    module.write_text(
        "from gradient_conformance import reference\n"
        "def build(source):\n    if ' = max ' in source:\n"
        "        raise ValueError('no max here')\n    return reference.build(source)\n")
    where = _located(str(module), "gradient/relu_and_neuron.ir")
    assert (where.kind, where.line, where.op) == ("rejected", 16, "max"), where.text()
    assert "no max here" in where.says and where.runs <= 6
    # Each prefix asked is an answer that decided it, the last the check's own run.
    assert len(where.decided_by) == where.runs + 1, where.decided_by
    assert where.decided_by[-1] == "the whole program: rejected (the check's own run)"
    assert any(p.endswith(": not rejected") for p in where.decided_by), where.decided_by
    module = _reference_running(tmp_path, "recip_fails", "if ' = recip ' in source:",
                                "    raise ArithmeticError('recip at run time')",
                                "out = run(buffers)")
    where = _located(module, "gradient/op_form_recip.ir")
    assert (where.kind, where.line, where.op) == ("run-error", 8, "recip"), where.text()


def test_a_leaf_no_entry_uses_is_said_to_receive_no_share():
    """Words, not a count of nothing: an input whose derivative is wrong though no entry uses
    it is "made of no share: it receives none" (it was "the no shares")."""
    tape = [["input", 2.0], ["input", 3.0], ["mul", 0, 0]]
    want = backprop_bits(tape)
    got = list(want)
    got[1] ^= 1
    where = locate_tape(tape, Outcome("ok", derivatives=want), Outcome("ok", derivatives=got))
    assert "made of no share: it receives none" in where.text(), where.text()
    assert "the no share" not in where.text()


def test_a_tape_s_values_are_not_taken_for_operand_indices():
    """Before, the tape locator took the value 0.0 of an input entry for the operand index 0,
    and counted a share twice sent by one entry once: "the sum of the 5 shares it receives
    (from entries 2, 3, 5, 6, 7)" where entry 0 got two shares, both from entry 3."""
    from gradient_conformance.conformance.diagnosis.locate import locate_tape
    from gradient_conformance.conformance.outcome import Outcome
    from gradient_conformance.reference.tape import backprop_bits
    tape = [["input", 2.0], ["input", 0.0], ["const", 0.0], ["mul", 0, 0], ["add", 3, 1]]
    want = backprop_bits(tape)
    got = list(want)
    got[0] ^= 1  # entry 0's derivative one ulp off
    where = locate_tape(tape, Outcome("ok", derivatives=want), Outcome("ok", derivatives=got),
                        [])
    text = where.text()
    assert "the sum of the 2 shares it receives (from entries 3, 3)" in text, text
    assert "the shares it sends to entry 0" in text and "made of the 2 shares" in text, text
    assert "entry 1" not in text and "entry 2" not in text, text  # the inputs' values 0.0


def test_a_crash_of_the_implementation_s_code_is_located_where_it_starts():
    """Issue 53: every crash said "reduced: no (... the location finds where it starts)" and
    then "location: none". A failure that names an exception of the implementation's code
    (type and place) is located as a signal is: the shortest prefix that crashes the same
    way, by bisection."""
    import numpy as np
    source = ("%a = buffer slot=0 dtype=f32 shape=[3]\n%o = buffer slot=1 dtype=f32 shape=[]\n"
              "%x = load %a\n%y = mul %x %x\n%s = reduce %y op=add\n%t = mul %s 2.0\n"
              "store %o %t\n")
    reading = Reading(source)
    buffers = {0: np.ones(3, np.float32), 1: np.zeros((), np.float32)}
    impl = load(str(ROOT / "tests" / "impls" / "crashes_at_reduce.py"))
    try:
        got = impl.run_case(source, buffers, reading.slots)
        assert got.status == "failure" and "TypeError" in got.message, got
        where = locate(impl, reading, buffers, reading.outcome(buffers), got)
    finally:
        impl.close()
    assert (where.line, where.kind) == (5, "crash"), where.text()
    assert "the implementation crashes with TypeError at " in where.says, where.says
    assert "; cut before it, the program was not" in where.says
