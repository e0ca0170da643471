"""The IR's vocabulary lives once, in reference/ops.py, and everything else derives from it
(README, "Layout"; SPEC.md, "Operations").

The tests here say what a new op costs: the places that must change, each checked for every
op of the table, so that a row added without one of them fails here naming the place; and a
scan that no other module keeps a list of ops of its own, which a new op would have to join.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from gradient_conformance.reference import exact, interp, realvalued
from gradient_conformance.reference.cases import load_case
from gradient_conformance.reference.ops import FEATURES, OPS, TRANSCENDENTAL, features_of
from gradient_conformance.reference.rules import RULES

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Every place a new op must be written, and what goes there. Nothing else lists ops: the
# signature checks, the interpreter's table, the features an implementation may declare,
# the ulps it may declare, the generators' menus, the variants' flushes and the forward
# checks all derive theirs from the row (the scan below holds every other module to it).
PLACES = {
    "reference/ops.py": "its row: arity, operand dtypes, result, attributes, rules, ulps, "
                        "and how an element is computed",
    "reference/rules.py": "its derivative, a row per rule its row names (none: no rule)",
    "generators/steps.py": "a step that writes it, unless a menu derived from the table "
                                "already does (a new elementwise op of an existing kind)",
    "cases/ops/": "a case file with its edge cases, bits given",
}
# And its arithmetic, where exact.py does not have it yet: the correctly rounded function in
# exact.py (ExactF32 in interp.py names it), and, for an f32 op, its real and dual forms in
# realvalued.py, which the cross-checks and the smooth generators read programs in.
ARITHMETIC = ("reference/exact.py", "reference/interp.py", "reference/realvalued.py")


def test_every_place_is_a_file_of_the_repository():
    for place in (*PLACES, *ARITHMETIC):
        assert (ROOT / place).exists(), place


def test_each_rule_row_belongs_to_one_op():
    named = [rule for op in OPS.values() for rule in op.rules]
    assert sorted(named) == sorted(RULES), "ops.py's rules and rules.py's rows disagree"


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_is_computed_in_every_domain(name):
    """An elementwise op names its element function; each domain has it."""
    for dtype, function in OPS[name].evaluate:
        if dtype == "f32":
            for domain in (interp.EXACT, realvalued.Real(), realvalued.Dual()):
                assert callable(getattr(domain, function, None)), (name, type(domain).__name__)
        else:
            assert callable(getattr(exact, function, None)), (name, function)


def test_each_op_has_a_case_file():
    used = set()
    for path in sorted((ROOT / "cases" / "ops").glob("*.ir")):
        used |= features_of(load_case(path).source)
    assert set(OPS) - used == set(), "ops with no case file in cases/ops/"


def test_the_features_are_the_ops_and_the_statements():
    assert set(OPS) <= FEATURES and "reduce_mul" in FEATURES
    assert TRANSCENDENTAL == {"exp2", "log2", "sin"}  # SPEC.md, "Values and arithmetic"


def _op_lists(path: pathlib.Path) -> list[str]:
    """The module-level (or class-level) names bound to a collection of two or more op names
    (or to frozenset, set or tuple of one): a list of ops of the module's own. A collection
    passed to some other call (a variant's `uses`, a step's menu) is that call's data."""
    found = []
    tree = ast.parse(path.read_text())
    bodies = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for body in bodies:
        for statement in body:
            value = statement.value if isinstance(statement, ast.Assign | ast.AnnAssign) \
                else None
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                    value.func.id in ("frozenset", "set", "tuple", "list") and value.args:
                value = value.args[0]
            elements = (value.elts if isinstance(value, ast.Tuple | ast.List | ast.Set) else
                        [k for k in value.keys if k is not None]
                        if isinstance(value, ast.Dict) else [])
            names = [e.value for e in elements if isinstance(e, ast.Constant)
                     and isinstance(e.value, str) and e.value in OPS]
            if len(names) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{statement.lineno} {names}")
    return found


def test_conformance_and_reports_keep_no_list_of_ops():
    """conformance/ and reports/ derive every list of ops from the table."""
    found = [line for folder in ("conformance", "reports")
             for path in sorted((ROOT / folder).rglob("*.py")) for line in _op_lists(path)]
    assert found == []


def test_generators_derive_their_menus():
    """Besides the hard cases kept per transcendental op (data), the generators' one list of
    their own is I32_DIVISION: the ops whose C semantics (signs, zero, -2^31 / -1) a step
    draws operands for."""
    found = [line for path in sorted((ROOT / "generators").rglob("*.py"))
             if path.name != "hard_to_round.py" for line in _op_lists(path)]
    assert [line.split(" ", 1)[1] for line in found] == ["['idiv', 'mod']"]


def test_the_scan_finds_a_list_of_ops(tmp_path):
    module = tmp_path / "module.py"
    module.write_text('UNARY = ("recip", "sqrt")\nONE = ("recip",)\n'
                      'class A:\n    TABLE = {"add": 1, "mul": 2}\n')
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert _op_lists(module) == ["module.py:1 ['recip', 'sqrt']",
                                     "module.py:4 ['add', 'mul']"]
    finally:
        ROOT = saved
