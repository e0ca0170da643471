"""Bounded-exhaustive cases enumerated from the tables. docs/generators.md, "Enumerations"."""

from __future__ import annotations

import functools

import pytest

from gradient_conformance.conformance.diagnosis.confirm import _drawn_into
from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.outcome import compare
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.conformance.transports.loading import load
from gradient_conformance.generators.enumerations import (
    G_CLASSES,
    IDENTITY_GROUPS,
    VALUE_CLASSES,
    enumerated_cases,
    enumerated_ops,
    forward_cases,
    identity_cases,
    identity_rows,
    not_by_value,
    rejection_cases,
)
from gradient_conformance.generators.tapes import tape_cases
from gradient_conformance.reference import exact
from gradient_conformance.reference.ops import OPS
from gradient_conformance.reference.rules import RULES
from gradient_conformance.reference.tape import backprop_bits
from tests.conftest import ROOT

FORWARD = {case.name: case for case in forward_cases()}
REJECTIONS = {case.name: case for case in rejection_cases()}
CASES = {case.name: case for case in [*enumerated_cases(), *identity_cases()]
         if case.name not in FORWARD}


def test_every_row_of_the_rules_is_enumerated_or_said_why_not():
    """A new row of RULES, or a new elementwise f32 op, gets its enumeration with no code of
    its own; a row that is not enumerated by value says why (not_by_value, from its op's
    entry in the table)."""
    enumerated = set(enumerated_ops())
    assert enumerated == {op for op in OPS if op in RULES and OPS[op].computed("f32")}
    for row in set(RULES) - enumerated:
        assert not_by_value(row), row
    assert {name.split("/")[0] for name in CASES} - {"identity", "shape.gradient"} == \
        enumerated | {"where"} | {
        row for row in RULES if row.startswith("reduce.")}
    for op in enumerated:
        kinds = {"loaded", "second"} | ({"same", "literal-right", "literal-left"}
                                         if OPS[op].arity == 2 else set())
        assert {name.split("/")[1] for name in CASES if name.split("/")[0] == op} == kinds


def test_every_op_past_f32_is_enumerated_at_every_class_of_its_dtype():
    """From OPS' dtypes: every binary op on i32 or bool has its loaded, same and literal
    cases (idiv and mod their trapping pairs apart), whose operand columns hold every class
    of the dtype; every cast between the three dtypes and every bitcast between f32 and
    i32, loaded and literal; and the spec accepts and runs each."""
    from gradient_conformance.generators.enumerations import CLASSES
    for name, op in OPS.items():
        for dtype in (d for d in op.dtypes if d != "f32") if op.arity == 2 and \
                not op.attributes else ():
            kinds = {"loaded", "same", "literal-right", "literal-left"} | (
                {"traps"} if name in ("idiv", "mod") else set())
            assert {n.split("/")[1] for n in FORWARD if n.split("/")[0] == f"{name}.{dtype}"} \
                == kinds, (name, dtype)
            loaded = FORWARD[f"{name}.{dtype}/loaded"].rows + FORWARD.get(
                f"{name}.{dtype}/traps", FORWARD[f"{name}.{dtype}/loaded"]).rows
            assert {a for a, _ in loaded} == {b for _, b in loaded} == set(CLASSES[dtype])
    casts = {n.split("/")[0] for n in FORWARD if n.startswith(("cast.", "bitcast."))}
    assert casts == {f"cast.{a}.{b}" for a in CLASSES for b in CLASSES} | {
        "bitcast.f32.i32", "bitcast.i32.f32"}
    assert {"-2147483648", "2147483647", "31", "32", "-1"} <= set(CLASSES["i32"])
    for name, case in FORWARD.items():
        assert Reading(case.source).outcome(case.buffers).status == "ok", name


def test_every_shape_class_meets_every_axis_set_and_every_shape_it_may_take():
    """Ranks 0 to 3, a 0-length and a 1-length dim; each shape's reduce over no axis=, the
    empty list and every nonempty set, for add, max and mul; its reshape to every other
    shape class of its size (every empty shape to every other); its expand of each size-1
    dim to 0, 1 and 3; values for every implementation, gradients too; the spec runs each."""
    from gradient_conformance.generators.enumerations import SHAPE_CLASSES, structure_cases
    assert {len(s) for s in SHAPE_CLASSES} == {0, 1, 2, 3}
    assert any(0 in s for s in SHAPE_CLASSES if len(s) == 3) and (0,) in SHAPE_CLASSES
    for case in structure_cases(gradients=False):
        shape = tuple(int(n) for n in case.name.split("/")[1][1:-1].split(",") if n)
        reduces = {(op, axis) for kind, op, axis in case.rows if kind == "reduce"}
        assert len(reduces) == 3 * (2 + 2 ** len(shape) - 1), case.name
        assert ("add", "axis=[]") in reduces and ("max", "") in reduces
        empty = [s for s in SHAPE_CLASSES if 0 in s and s != shape]
        if 0 in shape:
            assert {w for kind, w, _ in case.rows if kind == "reshape"} == {
                "[" + ",".join(map(str, s)) + "]" for s in empty}, case.name
        if 1 in shape:
            assert any(kind == "expand" and "0" in w for kind, w, _ in case.rows), case.name
    for case in [*structure_cases(gradients=False), *structure_cases(gradients=True)]:
        assert Reading(case.source).outcome(case.buffers).status == "ok", case.name


def test_each_case_holds_every_class_and_the_reference_runs_it():
    """Each value class (and each class of g) is an element of every loaded case: its
    operand columns hold all of VALUE_CLASSES, bit for bit, and its weights all of
    G_CLASSES; and the spec accepts and runs each case."""
    classes = {exact.f32_from_text(t) for t in VALUE_CLASSES}
    weights = {exact.f32_from_text(t) for t in G_CLASSES}
    for name, case in CASES.items():
        if name.startswith(("identity/", "shape.")):
            continue
        assert Reading(case.source).outcome(case.buffers).status == "ok", name
        arrays = {k: set(a.view("uint32").ravel().tolist()) for k, a in case.buffers.items()
                  if a.dtype.kind == "f"}
        assert any(classes <= bits for bits in arrays.values()), name
        assert any(weights <= bits for bits in arrays.values()), name


@pytest.mark.parametrize(("impl", "case"), [
    ("tests/impls/where_negative_zero.py", "where/loaded"),
    ("tests/impls/reduce_max_nan.py", "reduce.max/rows"),
    ("variant:max-tie-first", "max/loaded"),
    ("variant:signed-zero-literals-merged", "mul/literal-right"),
    ("variant:recip-form", "recip/loaded"),
    ("variant:no-hash-consing", "identity/loads"),
    ("variant:attributes-in-written-order", "identity/attributes"),
    ("variant:literals-through-binary64", "identity/literals"),
    ("variant:signed-zero-literals-merged", "identity/order"),
    ("tests/impls/indented_comments.py", "identity/text"),
    ("tests/impls/int_min_literal.py", "add.i32/literal-right"),
    ("tests/impls/bool_through_i32.py", "cast.f32.bool/loaded"),
    ("tests/impls/bool_through_i32.py", "cast.f32.bool/literal"),
    ("tests/impls/reshape_zero_copies.py", "shape.value/[0,3]"),
    ("tests/impls/call_dependence_by_body.py", "rejection/no-rule/call-dropping-its-parameter/0"),
    ("tests/impls/call_dependence_by_body.py",
     "rejection/no-rule/call-detaching-its-parameter/1"),
    ("tests/impls/call_dependence_by_body.py", "rejection/no-rule/call-casting-its-parameter/0"),
    ("tests/impls/zeros_as_nodes.py", "identity/zeros"),
    ("tests/impls/reduce_expand_as_mul.py", "reduce.expanded/6"),
    ("tests/impls/reduce_expand_as_mul.py", "reduce.expanded/17"),
])
def test_a_fault_at_one_class_is_caught_by_construction(impl, case):
    """Faults that show only at a signed zero, a NaN in a row, a tie or a literal: each
    enumerated case of their rule tells them from the spec, whatever a draw would reach."""
    spec = impl if impl.startswith("variant:") else str(ROOT / impl)
    implementation = load(spec, in_process=True)
    try:
        enumerated = {**CASES, **FORWARD, **REJECTIONS}[case]
        reading = Reading(enumerated.source)
        got = implementation.run_case(enumerated.source, dict(enumerated.buffers),
                                      reading.slots)
        assert compare(reading.outcome(enumerated.buffers), got) is not None
    finally:
        implementation.close()


def test_a_source_that_cannot_draw_ends_the_experiment_s_search_there():
    """A program whose inputs Hypothesis cannot draw (an enumerated one is too large):
    before, its Unsatisfiable ended the run with INTERNALERROR."""
    import time

    from hypothesis import strategies as st
    seen: list = []
    feed = _drawn_into(st.integers().filter(lambda n: False), time.monotonic() + 30,
                       lambda k, example: example)
    feed(lambda trial: seen.append(trial) or True)
    assert seen == []


def _one_node(case) -> list[bool]:
    """For each row of an identity case, whether the spec makes its P and Q one node: the
    gradients against them are then one value (0.7 + -1.3), else two (0.7 and -1.3)."""
    outcome = Reading(case.source).outcome(case.buffers)
    assert outcome.status == "ok", outcome.message
    slots = sorted(s for s in outcome.buffers if s >= 3)
    assert len(slots) == 2 * len(case.rows)
    return [outcome.buffers[p].tobytes() == outcome.buffers[q].tobytes()
            for p, q in zip(slots[::2], slots[1::2], strict=True)]


def test_the_reference_makes_one_node_of_what_the_spec_says_and_two_of_the_rest():
    """SPEC.md, "Hash consing", row by row: a literal in every spelling of its bits is one
    node (a decimal past a midpoint is the next f32's, not one rounded twice); operands in
    another order, the other zero and another function are two; attributes in either order
    are one; loads of a buffer are one unless a store to it comes between; names that differ
    only in punctuation or case are two values, and one when they hold one statement;
    what the text form ignores between two statements changes nothing."""
    found = {case.name.split("/")[1]: _one_node(case) for case in identity_cases()}
    assert set(found) == set(IDENTITY_GROUPS)
    literals = identity_rows("literals")
    # The last three rows: a literal, and a decimal just past its midpoint (_past_midpoints).
    assert found["literals"] == [True] * (len(literals) - 3) + [False] * 3
    assert len(literals) > 90
    assert found["order"] == [False] * len(identity_rows("order"))
    assert found["attributes"] == [True, True, False]
    assert found["loads"] == [True, True, False, False, True]
    assert found["calls"] == [True, False, False, False]
    assert found["names"] == [False, True] * (len(identity_rows("names")) // 2)
    # comments and blank lines are nothing; FLT_MAX and the smallest subnormal in two
    # spellings are one literal each
    assert found["text"] == [True, False, True, True, False, True, True, True]
    # x's gradient when it received nothing is the zeros of its shape, like any other
    # `expand 0.0` (gradient.md), and apart from `expand -0.0`
    assert found["zeros"] == [True, True, False, True, True]


@pytest.mark.parametrize("name", ["max/loaded", "identity/loads", "reduce.max/rows"])
def test_a_narrowed_case_is_the_same_program_of_the_combinations_kept(name):
    """What the check reports (running.check_enumerated): the case narrowed to the
    combinations at which an implementation differs, one element (or one pair) each; the
    differing outputs map back to their combinations."""
    case = CASES[name]
    outcome = Reading(case.source).outcome(case.buffers)
    last = len(case.rows) - 1
    # The last element of the last output is the last combination's.
    slot = max(outcome.buffers)
    differing = {(slot, int(outcome.buffers[slot].size) - 1)}
    assert case.combinations_of(differing) == [last]
    narrowed = case.narrowed([0, last])
    assert narrowed.rows == (case.rows[0], case.rows[last])
    small = Reading(narrowed.source).outcome(narrowed.buffers)
    assert small.status == "ok"
    for slot, values in small.buffers.items():
        assert values.shape[0] in (1, 2, 3) or values.shape == (1, 4), (slot, values.shape)
    assert "narrowed to 2 of its" in narrowed.description


def test_every_rule_in_every_disguise_is_enumerated_and_the_reference_decides_each():
    """rejection_cases: a case per rule of errors.RULES and disguise of DISGUISES, and per
    near miss, over a scalar and a vector; the reference rejects each rejection case for its
    own rule, and accepts each near miss."""
    from gradient_conformance.generators.enumerations import rejection_cases
    from gradient_conformance.generators.rejections import DISGUISES, NEAR_MISSES
    from gradient_conformance.reference import errors
    found = {case.name: case for case in rejection_cases()}
    assert len(found) == 2 * (sum(len(DISGUISES[r][1]) for r in errors.RULES) +
                              len(NEAR_MISSES))
    assert {n.split("/")[1] for n in found if n.startswith("rejection/")} == set(errors.RULES)
    assert any("reduce-opmul-axis" in n for n in found)  # reduce op=mul with its axes too
    for name, case in found.items():
        outcome = Reading(case.source).outcome(case.buffers)
        if name.startswith("rejection/"):
            assert outcome.status == "rejected", (name, case.source)
            assert f"[{name.split('/')[1]}]" in outcome.message, (name, outcome.message)
        else:
            assert outcome.status == "ok", (name, outcome.message)


TAPE_CASES = tape_cases()
TAPE_VARIANTS = sorted(name for name, variant in CATALOGUE.items() if variant.tape)


@functools.cache
def _spec_bits(name: str) -> tuple[int, ...]:
    return tuple(backprop_bits(next(c for c in TAPE_CASES if c.name == name).tape))


@pytest.mark.parametrize("name", TAPE_VARIANTS)
def test_every_tape_variant_is_told_from_the_spec_by_an_enumerated_tape(name):
    """Tapes by construction (generators/tapes.py): each way of walking or summing a tape
    that the catalogue knows gives other bits than the spec on an enumerated tape, and on
    the tape of one of the rows that differ there, alone (what the check reports)."""
    semantics = CATALOGUE[name].semantics()
    for case in TAPE_CASES:
        spec, theirs = _spec_bits(case.name), backprop_bits(case.tape, semantics)
        differing = [k for k, (a, b) in enumerate(zip(spec, theirs, strict=True)) if a != b]
        if differing:
            break
    else:
        pytest.fail(f"no enumerated tape tells {name} from the spec")
    rows = case.rows_of(differing)
    assert any(backprop_bits(case.narrowed([row]).tape) !=
               backprop_bits(case.narrowed([row]).tape, semantics) for row in rows), case.name


def test_a_row_of_an_enumerated_tape_stands_alone():
    """A narrowed tape is the rows' own blocks, summed into the last entry by adds that
    pass 1.0 to each: its derivatives are the whole tape's at those entries."""
    case = next(c for c in TAPE_CASES if c.name == "tape.fan-in/9/balanced/descending")
    whole, owners = case.write(case.rows)
    for row in (0, len(case.rows) // 2, len(case.rows) - 1):
        alone = backprop_bits(case.narrowed([row]).tape)
        mine = [b for b, owner in zip(backprop_bits(whole), owners, strict=True)
                if owner == row]
        assert alone[:len(mine)] == mine
    assert len(case.rows) > 100 and case.narrowed([0]).tape == case.write(case.rows[:1])[0]


@pytest.mark.parametrize("fault", ["depth_first", "numpy_sum", "zero_passes_nothing"])
def test_a_student_s_tape_fault_is_caught_by_an_enumerated_tape(fault):
    """The three tape faults that passed the ci profile (issue 55), written apart from the
    oracle (tests/impls/tape_student.py): each gives other bits on an enumerated tape."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "impls"))
    try:
        from tape_student import backprop_with
    finally:
        sys.path.remove(str(ROOT / "tests" / "impls"))
    for case in TAPE_CASES:
        theirs = [exact.f32_from_float(v) for v in backprop_with(case.tape, fault)]
        if theirs != list(_spec_bits(case.name)):
            return
    pytest.fail(f"no enumerated tape tells {fault} from the spec")
