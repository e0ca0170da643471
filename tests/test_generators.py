"""The generators (generators/): every case is what it says it is, together they reach every op,
rule and rejection, a planted fault shrinks to a small program, and order-sensitive cases are
order-sensitive."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import hypothesis
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gradient_conformance import reference
from gradient_conformance.generators import buffers as buffers_module
from gradient_conformance.generators import (
    buffers_for,
    differentiable_programs,
    exact_programs,
    invalid_gradients,
    kink_distance,
    near_misses,
    order_sensitive_gradients,
    programs,
)
from gradient_conformance.generators import order as order_module
from gradient_conformance.generators import writer as writer_module
from gradient_conformance.generators.case import Case
from gradient_conformance.generators.order import arrival_order, walked_order
from gradient_conformance.generators.steps import _bitcast
from gradient_conformance.generators.writer import Writer
from gradient_conformance.reference import cases, exact, syntax
from gradient_conformance.reference.cases import output_only_slots
from gradient_conformance.reference.errors import RULES, IRError
from gradient_conformance.reference.graph import SIGNATURES
from gradient_conformance.reference.ops import POISON
from gradient_conformance.reference.program import Define, Loop
from gradient_conformance.reference.rules import RULES as RULE_TABLE
from gradient_conformance.reference.rules import rule_key

ROOT = Path(__file__).resolve().parent.parent

checked = settings(max_examples=100, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _runs_cleanly(case, semantics=reference.SPEC) -> dict:
    run = reference.build(case.source, semantics)
    return run({k: v.copy() for k, v in case.buffers.items()})


@checked
@given(programs())
def test_programs_build_and_run(case):
    assert case.expect_error is None
    out = _runs_cleanly(case)
    assert set(out) == set(case.buffers)


@checked
@given(exact_programs())
def test_exact_programs_have_no_transcendental_op(case):
    assert not case.features & {"exp2", "log2", "sin"}
    for line in case.source.splitlines():
        assert not {"exp2", "log2", "sin"} & set(line.split())
    _runs_cleanly(case)


@checked
@given(differentiable_programs())
def test_differentiable_programs_build_and_keep_away_from_kinks(case):
    assert "gradient" in case.source
    assert case.kink_distance is not None and case.kink_distance >= 1e-3
    _runs_cleanly(case)


def _distance(source: str, values: list[float]) -> float:
    slots = cases.buffer_slots(source)
    buffers = {0: np.array(values, np.float32).reshape(slots[0][1])}
    buffers |= {slot: np.zeros(shape, np.float32) for slot, (_, shape) in slots.items() if slot}
    return kink_distance(source, buffers)


REDUCE_MAX = """%a = buffer slot=0 dtype=f32 shape=[3]
%o = buffer slot=1 dtype=f32 shape=[3]
%x = load %a
%y = reduce %x op={op}
%g = gradient %y %x
store %o %g
"""


def test_a_comparison_of_a_value_with_itself_is_no_kink():
    """reduce max's rule compares each element with the max it picked: at the argmax that is
    the same number, which stays so nearby, so no kink; the kinks are where two elements tie
    (docs/oracle.md, "How the oracle is checked"). The count of maxima is 1 there, which recip
    measures as 1 from its pole."""
    assert _distance(REDUCE_MAX.format(op="max"), [1.5, 0.25, -1.0]) == 1.0
    assert _distance(REDUCE_MAX.format(op="max"), [1.5, 1.4995, -1.0]) < 1e-3
    assert _distance(REDUCE_MAX.format(op="max"), [1.5, 1.5, -1.0]) == 0.0
    # A max over copies of one value is that value: smooth, its derivative whole (shared
    # among 3 maxima, which recip measures as 3 from its pole).
    copies = ("%a = buffer slot=0 dtype=f32 shape=[]\n%o = buffer slot=1 dtype=f32 shape=[]\n"
              "%x = load %a\n%e = expand %x shape=[3]\n%y = reduce %e op=max\n"
              "%g = gradient %y %x\nstore %o %g\n")
    assert _distance(copies, [0.75]) == 3.0
    # Equal but computed apart is a tie: x*2 and 1.0 at x = 0.5.
    equal = ("%a = buffer slot=0 dtype=f32 shape=[]\n%o = buffer slot=1 dtype=f32 shape=[]\n"
             "%x = load %a\n%d = mul %x 2.0\n%y = max %d 1.0\n%g = gradient %y %x\n"
             "store %o %g\n")
    assert _distance(equal, [0.5]) == 0.0


def test_smooth_programs_reach_the_reduce_max_rule():
    """Before a comparison of a value with itself stopped counting as a kink, nearly every
    smooth program with a gradient through a reduce op=max was thrown away: 3 of the 100
    drawn here had one, against 30 since."""
    through = 0

    @checked
    @given(differentiable_programs())
    def count(case):
        nonlocal through
        program = reference.compile_program(case.source)
        through += any(v.node.op == "reduce" and v.node.attr("op") == "max" and v.shares
                       for s in program.statements if isinstance(s, Define) and s.expansion
                       for v in s.expansion.visits)

    count()
    assert through >= 10, through


@checked
@given(near_misses())
def test_near_misses_are_accepted(case):
    _runs_cleanly(case)


@checked
@given(invalid_gradients())
def test_invalid_gradients_are_rejected_with_their_rule(case):
    with pytest.raises(IRError) as raised:
        reference.build(case.source)
    assert raised.value.kind == case.expect_error, (case.description, str(raised.value))


@checked
@given(order_sensitive_gradients())
def test_order_sensitive_gradients_are_order_sensitive(case):
    """In the reference, the gradient is the left fold in arrival order, and program order and
    reversed arrival order would each give other bits."""
    out = _runs_cleanly(case)
    constants = [int(b) for b in case.buffers[1].view(np.uint32)]
    order = arrival_order(case.source)
    assert sorted(order) == list(range(len(constants))) and len(order) >= 3

    def fold(indices):
        return exact.f32_fold([constants[k] for k in indices])

    got = int(out[2].view(np.uint32))
    assert exact.same_f32(got, fold(order))
    assert not exact.same_f32(got, fold(list(range(len(constants)))))
    assert not exact.same_f32(got, fold(order[::-1]))
    # The generator reads the walk's order off its own lines, without building: the same.
    lines = case.source.splitlines()
    root = next(line.split()[3] for line in lines if " = gradient " in line)
    assert walked_order(lines, root) == order


def test_order_sensitive_gradients_throw_almost_no_draw_away(monkeypatch):
    """The strategy constructs its cases: where the trees drawn fold the arrival order alike
    with an order it must be told from, it mirrors one, and where the constants drawn do not
    tell the orders apart, it builds some that do. Its `assume` is a last resort for what
    those constants do not tell (two in ten thousand random orders): at most 1% of draws.
    (Before, a quarter of them were thrown away.)"""
    refused = []

    def assume(condition):
        if not condition:
            refused.append(condition)
        return hypothesis.assume(condition)

    monkeypatch.setattr(order_module, "assume", assume)
    assert len(_draw(order_sensitive_gradients(), 300)) == 300
    assert len(refused) <= 3, f"{len(refused)} draws thrown away"


@pytest.mark.parametrize("strategy", [programs, exact_programs, differentiable_programs,
                                      invalid_gradients, near_misses, order_sensitive_gradients],
                         ids=lambda s: s.__name__)
def test_a_drawn_case_is_parsed_once(strategy, monkeypatch):
    """Each draw, rejected ones included, parses its case at most once. Not counted: a
    restated gradient (one draw in four) builds the program written so far through
    reference.compile_program, to learn which nodes its expansion made."""
    counted = []

    def parse(text, real=syntax.parse):
        counted.append(text)
        return real(text)

    for module in (syntax, writer_module, buffers_module):
        monkeypatch.setattr(module, "parse", parse)
    per_draw = []

    @checked
    @given(st.data())
    def draw(data):
        before = len(counted)
        try:
            data.draw(strategy())
        finally:
            per_draw.append(len(counted) - before)

    draw()
    assert per_draw and max(per_draw) <= 1, Counter(per_draw)


@pytest.mark.parametrize("strategy", [programs, differentiable_programs,
                                      order_sensitive_gradients, invalid_gradients, near_misses])
def test_the_check_reads_the_statements_drawn(monkeypatch, strategy):
    """A check reads a drawn program from the statements its case carries: the one parse is
    the strategy's."""
    from gradient_conformance.conformance import readings

    def parse(text):
        raise AssertionError("parsed again")

    @settings(max_examples=10, deadline=None, database=None)
    @given(strategy())
    def read(case):
        assert case.parsed and list(case.parsed) == syntax.parse(case.source)
        with monkeypatch.context() as patched:
            patched.setattr(readings, "parse", parse)
            outcome = readings.Reading(case.source, case.parsed).outcome(case.buffers)
        assert (outcome.status == "ok") == (case.expect_error is None), outcome

    read()


# --- coverage ---------------------------------------------------------------------------------


def _draw(strategy, count: int) -> list:
    drawn = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate],
              deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(case):
        drawn.append(case)

    collect()
    return drawn


def _ops_and_rules(case) -> tuple[set[str], set[str]]:
    """What the reference sees in a case: the ops of its graph (and function bodies, and
    statements), and the gradient rules its walks used."""
    program = reference.compile_program(case.source)
    ops = {n.op for n in program.graph.nodes}
    for function in program.functions.values():
        for instance in function.instances.values():
            ops |= {n.op for n in instance.graph.nodes}
    rules: set[str] = set()

    def visit(statements):
        for s in statements:
            if isinstance(s, Loop):
                ops.add("range")
                visit(s.body)
            elif isinstance(s, Define) and s.expansion:
                ops.add("gradient")
                rules.update(rule_key(v.node) for v in s.expansion.visits
                             if rule_key(v.node) in RULE_TABLE)
            elif not isinstance(s, Define):
                ops.add("store")
    visit(program.statements)
    return ops, rules


def test_generators_reach_every_op_rule_and_rejection(figures):
    started = time.perf_counter()
    valid = _draw(programs(), 800) + _draw(differentiable_programs(), 400) + \
        _draw(near_misses(), 150) + _draw(order_sensitive_gradients(), 30)
    invalid = _draw(invalid_gradients(), 200)
    op_counts, rule_counts = Counter(), Counter()
    for case in valid:
        ops, rules = _ops_and_rules(case)
        op_counts.update(ops)
        rule_counts.update(rules)
    rejection_counts = Counter()
    for case in invalid:
        try:
            reference.build(case.source)
        except IRError as problem:
            rejection_counts[problem.kind] += 1
    every_op = set(SIGNATURES) | {"call", "gradient", "store", "range", "buffer", "const"}
    assert not every_op - set(op_counts), f"never generated: {sorted(every_op - set(op_counts))}"
    assert not set(RULE_TABLE) - set(rule_counts), \
        f"rules never used: {sorted(set(RULE_TABLE) - set(rule_counts))}"
    assert not set(RULES) - set(rejection_counts), \
        f"rejections never made: {sorted(set(RULES) - set(rejection_counts))}"
    elapsed = time.perf_counter() - started
    figures(f"coverage over {len(valid)} valid and {len(invalid)} invalid cases "
            f"({elapsed:.1f} s):")
    figures("  ops: " + ", ".join(f"{op} {n}" for op, n in sorted(op_counts.items())))
    figures("  rules: " + ", ".join(f"{r} {n}" for r, n in sorted(rule_counts.items())))
    figures("  rejections: " + ", ".join(f"{r} {n}" for r, n in sorted(rejection_counts.items())))


# --- shrinking --------------------------------------------------------------------------------


def _reversed_fold(e, shares, senders):
    """The planted fault: shares summed in reversed arrival order."""
    total = shares[-1]
    for share in reversed(shares[:-1]):
        total = e("add", total, share)
    return total


REVERSED = dataclasses.replace(reference.SPEC, fold=_reversed_fold)


def _differs_under_reversed_fold(case) -> bool:
    want, got = _runs_cleanly(case), _runs_cleanly(case, REVERSED)
    return any(not cases.same_bits(want[k], got[k]) for k in want)


def _shrunk(seed: int) -> str:
    """The counterexample Hypothesis shrinks the planted fault to, with a fixed seed (the last
    failing case it reports is the shrunk one), as its source, or "" if it finds none."""
    failing = []

    @settings(max_examples=2000, database=None, deadline=None, report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    @hypothesis.seed(seed)
    @given(differentiable_programs())
    def search(case):
        if _differs_under_reversed_fold(case):
            failing.append(case)
            raise AssertionError("the planted fault shows")

    try:
        search()
    except AssertionError:
        pass
    return failing[-1].source if failing else ""


def _shrunk_alone(seed: int) -> str:
    """`_shrunk` in an interpreter of its own. Hypothesis mixes into its draws the constants of
    every local module imported so far, so the same seed draws other programs after other tests
    ran in the process (CI's worker shrank to 9, 9, 11 statements where a lone run gave 9, 8,
    7). A fresh interpreter makes the seed mean one search."""
    code = f"from tests.test_generators import _shrunk; print(_shrunk({seed}), end='')"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# The smallest program the planted fault shows in: three shares of x (two from x*x, one from
# the add), arriving in an order whose reversal rounds differently at x = 0.3.
SMALLEST = ("%a = buffer slot=0 dtype=f32 shape=[]\n%o = buffer slot=1 dtype=f32 shape=[]\n"
            "%x = load %a\n%y = mul %x %x\n%z = add %y %x\n%g = gradient %z %x\n"
            "store %o %g\n")


@pytest.mark.slow
def test_a_planted_fault_shrinks_to_a_small_program(figures):
    """Reversing the fold changes the bits only with three or more order-sensitive shares, so
    no program under SMALLEST's 7 statements shows it. Shrinking is a local search whose start
    depends on the seed (and on the constants of the modules imported, see `_shrunk_alone`):
    from each of three seeds it must find the fault, and the best must be at most twice the
    smallest. All three sizes are reported."""
    witness = Case(SMALLEST, {0: np.float32(0.3).reshape(()), 1: np.zeros((), np.float32)},
                   None, "the smallest")
    assert _differs_under_reversed_fold(witness)
    started = time.perf_counter()
    results = [_shrunk_alone(seed) for seed in (1, 2, 3)]
    assert all(results), "a seed found no counterexample"
    sizes = [len(source.splitlines()) for source in results]
    best = results[sizes.index(min(sizes))]
    figures(f"shrinking: the reversed-fold fault shrank to {', '.join(map(str, sizes))} "
            f"statements from seeds 1, 2, 3 ({time.perf_counter() - started:.1f} s; the "
            f"smallest possible is {len(SMALLEST.splitlines())}); the smallest found:")
    for line in best.splitlines():
        figures(f"    {line}")
    assert min(sizes) <= 2 * len(SMALLEST.splitlines()), best


def test_the_fault_is_invisible_without_order_sensitivity():
    """The shrinking test's predicate is no tautology: a single share is not affected."""
    source = ("%a = buffer slot=0 dtype=f32 shape=[]\n%o = buffer slot=1 dtype=f32 shape=[]\n"
              "%x = load %a\n%y = sin %x\n%g = gradient %y %x\nstore %o %g\n")
    single = Case(source, {0: np.float32(0.5).reshape(()), 1: np.zeros((), np.float32)}, None,
                  "one share")
    assert not _differs_under_reversed_fold(single)


# --- buffers ------------------------------------------------------------------------------------


def test_anything_buffers_reach_the_special_values():
    source = ("%a = buffer slot=0 dtype=f32 shape=[8]\n%b = buffer slot=1 dtype=i32 shape=[8]\n"
              "%x = load %a\n%y = load %b\nstore %a %x\nstore %b %y\n")
    seen_f32, seen_i32 = set(), set()
    for buffers in _draw(buffers_for(source), 200):
        seen_f32 |= {int(b) for b in buffers[0].view(np.uint32)}
        seen_i32 |= {int(v) for v in buffers[1]}
    assert any(exact.is_nan(b) for b in seen_f32)
    assert {0x00000000, 0x80000000, 0x7F800000, 0xFF800000} <= seen_f32
    assert any(0 < b < 0x00800000 for b in seen_f32)  # a positive subnormal
    assert {exact.I32_MIN, exact.I32_MAX} <= seen_i32


def test_slots_only_stored_into_start_as_poison():
    """A slot the program never loads starts as POISON (a NaN no arithmetic makes, and its
    bits as an i32), so no program leaves it as it was by accident; a bool slot as drawn."""
    source = ("%a = buffer slot=0 dtype=f32 shape=[2]\n%o = buffer slot=1 dtype=f32 shape=[2]\n"
              "%i = buffer slot=2 dtype=i32 shape=[]\n%c = buffer slot=3 dtype=bool shape=[]\n"
              "%x = load %a\nstore %o %x\nstore %i 1\nstore %c true\n")
    assert output_only_slots(source) == {1, 2, 3}
    for buffers in _draw(buffers_for(source), 20):
        assert buffers[1].view(np.uint32).tolist() == [POISON, POISON]
        assert int(buffers[2].view(np.uint32)) == POISON and buffers[3].dtype == np.bool_


def test_smooth_buffers_keep_their_distance():
    source = ("%a = buffer slot=0 dtype=f32 shape=[4]\n%b = buffer slot=1 dtype=f32 shape=[4]\n"
              "%x = load %a\n%y = load %b\n%m = max %x %y\n%r = recip %x\n"
              "%i = cast %y dtype=i32\n")
    for buffers in _draw(buffers_for(source, mode="smooth", min_kink_distance=0.01), 50):
        x, y = buffers[0].astype(np.float64), buffers[1].astype(np.float64)
        assert np.all(np.abs(x - y) >= 0.01) and np.all(np.abs(x) >= 0.01)
        assert np.all(np.abs(y - np.round(y)) >= 0.01)
        assert kink_distance(source, buffers) >= 0.01


def test_cases_per_second(figures):
    """The figures for the closing note: cases each strategy draws and builds per second."""
    for name, strategy in [("programs", programs()), ("exact_programs", exact_programs()),
                           ("differentiable_programs", differentiable_programs()),
                           ("order_sensitive_gradients", order_sensitive_gradients()),
                           ("invalid_gradients", invalid_gradients()),
                           ("near_misses", near_misses())]:
        started = time.perf_counter()
        drawn = _draw(strategy, 100)
        for case in drawn:
            try:
                reference.build(case.source)
            except IRError:
                assert case.expect_error is not None
        rate = len(drawn) / (time.perf_counter() - started)
        figures(f"speed: {name}: {rate:.0f} cases drawn and built per second")
        assert drawn


@checked
@given(programs())
def test_programs_bitcast_to_i32_only_loaded_values(case):
    """SPEC.md, "NaN": an arithmetic NaN's payload is unspecified, so no generated program
    makes an i32 of one that anything but a bitcast back to f32 reads (which gives the bits
    again, and NaN matches NaN). Every other f32 -> i32 bitcast takes a load."""
    lines = [line.split("#")[0].split() for line in case.source.splitlines()]
    stored: set[str] = set()  # buffers stored to so far: a load after that reads no input
    loads, computed = set(), set()
    for words in lines:
        if words and words[0] == "store":
            stored.add(words[1])
        if len(words) >= 4 and words[2] == "load" and words[3] not in stored:
            loads.add(words[0])
        if len(words) >= 5 and words[2] == "bitcast" and "dtype=i32" in words:
            operand = words[3]
            if operand.startswith("%") and operand not in loads:
                computed.add(words[0])
    for words in lines:
        for name in computed & set(words[1:]):
            assert words[2] == "bitcast" and "dtype=f32" in words, (name, words)


@st.composite
def _bitcasts_beside_arithmetic(draw):
    """A writer whose pool holds a load and a computed value, then a few bitcast steps."""
    w = Writer(draw)
    x = w.input("f32", ())
    w.value("add", [x, x], "f32", ())
    for _ in range(4):
        _bitcast(w, ())
    return w


@checked
@given(_bitcasts_beside_arithmetic())
def test_bitcast_to_i32_never_takes_a_computed_value(w):
    loads = {v.text for v in w.pool if v.is_load}
    for line in w.body:
        words = line.split()
        if "bitcast" in words and words[-1] == "dtype=i32":
            assert words[3] in loads, line


def test_features_name_higher_order_and_reduce_mul():
    from gradient_conformance.reference.ops import features_of
    head = "%a = buffer slot=0 dtype=f32 shape=[2]\n%x = load %a\n%s = reduce %x op=add\n"
    first = features_of(head + "%g = gradient %s %x\n")
    assert "gradient" in first and "higher_order" not in first
    chained = features_of(head + "%g = gradient %s %x\n%t = reduce %g op=add\n"
                          "%h = gradient %t %x\n")
    assert "higher_order" in chained
    product = features_of(head + "%p = reduce %x op=mul\n")
    assert "reduce_mul" in product and "reduce" in product


@checked
@given(programs(shapes=[(2, 2)], dtypes=("f32",), exclude={"range", "call", "reduce"}))
def test_bounds_on_shapes_dtypes_and_ops_are_kept(case):
    program = reference.compile_program(case.source)
    assert {n.dtype for n in program.graph.nodes if n.op != "const"} <= {"f32"}
    assert not {"range", "call", "reduce"} & case.features
    stored = {line.split()[1] for line in case.source.splitlines()
              if line.strip().startswith("store")}
    for node in program.graph.nodes:  # the inputs: buffers the program only reads
        if node.op == "buffer" and program.names[node] not in stored:
            assert node.shape == (2, 2), case.source
    _runs_cleanly(case)


# A reach that cannot quietly fall (docs/generators.md, "Floors"): the share of derandomized
# draws that hold each op, take each rule on a gradient's path and each kind of condition.
# Measured 2026-12-05 over FLOOR_DRAWS draws: programs() holds every op in 2 % or more (shr,
# the least); differentiable_programs() every op with a rule in 5 % or more (exp2 and max);
# rows of the rules are taken in 0.7 % (cast) to 70 %; every kind of condition in 20 % or
# more. Before Writer.fairly, exp2 and log2 were in 1-2 % of programs, which the floors fail.
FLOOR_DRAWS = 1000
OP_FLOOR = 1.5  # % of programs() draws holding each op of the table it can write
RULE_OP_FLOOR = 3.0  # % of differentiable_programs() draws holding each op with a rule
RULE_FLOOR = 0.5  # % of differentiable_programs() draws whose gradient takes each row
KIND_FLOOR = 10.0  # % of differentiable_programs() draws taking some condition of each kind


def _draw_shares(strategy, measure) -> tuple[Counter, int]:
    """How many of FLOOR_DRAWS derandomized draws of `strategy` hold each name that
    `measure(case)` gives."""
    found: Counter = Counter()
    drawn = [0]

    @settings(max_examples=FLOOR_DRAWS, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(strategy)
    def draw(case):
        drawn[0] += 1
        found.update(set(measure(case)))

    draw()
    return found, drawn[0]


def _below(found: Counter, drawn: int, names, floor: float) -> dict[str, float]:
    return {n: round(100 * found[n] / drawn, 2) for n in names if 100 * found[n] / drawn < floor}


@pytest.mark.slow
def test_no_op_rule_or_kind_of_condition_falls_below_its_floor():
    from gradient_conformance.conformance.readings import Reading
    from gradient_conformance.reference.conditions import MEASURED
    from gradient_conformance.reference.ops import FEATURES, features_of
    from gradient_conformance.reference.rules import RULES
    untyped = {f for f in FEATURES if ":" not in f}
    found, drawn = _draw_shares(programs(), lambda case: features_of(case.source))
    assert drawn >= FLOOR_DRAWS // 2
    assert not _below(found, drawn, sorted(untyped), OP_FLOOR), "programs()"

    def measured(case):
        reading = Reading(case.source, case.parsed or ())
        reading.outcome(case.buffers)
        names = reading.conditions(case.buffers)
        return features_of(case.source) | {MEASURED[n].kind for n in names} | names

    found, drawn = _draw_shares(differentiable_programs(), measured)
    ruled = {row.split(".")[0] for row in RULES}
    assert not _below(found, drawn, sorted(ruled), RULE_OP_FLOOR), "differentiable_programs()"
    # detach's row passes nothing: it is taken where x lies behind a detach, which the
    # differentiable programs write beside a path of their own (`mul a (detach a)`).
    rows = [f"rule.{row}" for row in RULES if row != "detach"]
    assert not _below(found, drawn, rows, RULE_FLOOR)
    kinds = {c.kind for c in MEASURED.values()} - {"rejection"}  # valid programs, by design
    assert not _below(found, drawn, sorted(kinds), KIND_FLOOR)


def test_generated_programs_draw_empty_values_and_every_i32_class_with_a_floor():
    """Issue 55: programs draw an empty base shape (a 0-length dim) in about one program in
    EMPTY_ONE_IN, and i32 literals from every class the enumerations take (INT_MIN and
    INT_MAX, the shift counts' edges), so that fuzzing explores around what the enumerations
    pin down; the reference runs every one of them."""
    from gradient_conformance.reference.conditions import I32_CLASSES
    drawn = _draw(programs(), 400)
    empty = [c for c in drawn if any(0 in shape for shape in _shapes_of(c.source))]
    assert len(empty) >= 400 // (2 * writer_module.EMPTY_ONE_IN), len(empty)
    literals = Counter(word for c in drawn for word in c.source.split()
                       if word.lstrip("-").isdigit())
    # Every class is on the menu, each as likely as the others (Writer.fairly); a program
    # takes few i32 literals, so 400 show most classes, not necessarily all.
    assert set(I32_CLASSES) <= set(writer_module.I32_LITERALS)
    assert len(set(I32_CLASSES) & set(literals)) >= len(I32_CLASSES) // 2, literals
    for case in empty[:20]:
        _runs_cleanly(case)


def _shapes_of(source: str) -> list[tuple[int, ...]]:
    return [tuple(int(d) for d in part.split("]")[0].split(",") if d.strip())
            for part in source.split("shape=[")[1:]]
