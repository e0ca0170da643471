"""Every worked example passes against the reference: the shared ones (../shared/spec/examples)
and the project's own case files (cases/). docs/suite.md, "Case files"."""

from __future__ import annotations

import pytest

from gradient_conformance import reference
from gradient_conformance.reference import cases
from tests.conftest import CASES, SHARED_EXAMPLES

OWN = cases.case_paths([CASES])
SHARED = cases.case_paths([SHARED_EXAMPLES]) if SHARED_EXAMPLES.is_dir() else []


@pytest.mark.parametrize("path", OWN, ids=lambda p: str(p.relative_to(CASES)))
def test_own_case(path):
    ok, why = cases.check(cases.load_case(path), reference.build)
    assert ok, why


@pytest.mark.skipif(not SHARED, reason="../shared/spec/examples is not beside the checkout")
@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_shared_example(path):
    ok, why = cases.check(cases.load_case(path), reference.build)
    assert ok, why


@pytest.mark.skipif(not SHARED, reason="../shared/spec/examples is not beside the checkout")
def test_the_packaged_examples_are_the_shared_ones():
    """cases/examples/ is the copy of the shared worked examples that the package ships (an
    installed suite has no ../shared): file for file and byte for byte."""
    copy = CASES / "examples"
    theirs = {p.name: p.read_bytes() for p in SHARED_EXAMPLES.iterdir() if p.is_file()}
    ours = {p.name: p.read_bytes() for p in copy.iterdir() if p.is_file()}
    assert ours == theirs, sorted(set(ours) ^ set(theirs)) or "a file differs"


def test_the_wheel_s_data_lists_every_case_folder():
    """Every folder of cases/ is a data package of pyproject.toml, so the wheel carries it."""
    import tomllib
    listed = set(tomllib.loads((CASES.parent / "pyproject.toml").read_text())["tool"]
                 ["setuptools"]["package-data"])
    folders = {f"gradient_conformance.cases.{d.name}" for d in CASES.iterdir() if d.is_dir()}
    assert folders <= listed, sorted(folders - listed)


def test_cases_cover_every_rejection_rule():
    """Each rule code of SPEC.md is the expected error of at least one case file."""
    kinds = {cases.load_case(p).error for p in OWN}
    missing = set(reference.errors.RULES) - kinds
    assert not missing, f"no case file expects {sorted(missing)}"


def test_cases_cover_every_op():
    """Each op of the signature table, and call, range, gradient and store, appears in the
    graph of some valid case file."""
    from gradient_conformance.reference.graph import SIGNATURES
    seen = set()
    for path in OWN:
        case = cases.load_case(path)
        if case.error:
            continue
        program = reference.compile_program(case.source)
        seen |= {n.op for n in program.graph.nodes}
        seen |= {type(s).__name__ for s in program.statements}
    wanted = set(SIGNATURES) | {"call", "range", "Store", "Loop"}
    missing = wanted - seen
    assert not missing, f"no case file uses {sorted(missing)}"


def test_cases_cover_every_gradient_rule():
    """Each row of the rules table is used by the expansion of some case file."""
    from gradient_conformance.reference.rules import RULES, rule_key
    used = set()
    for path in OWN + SHARED:
        case = cases.load_case(path)
        if case.error:
            continue
        program = reference.compile_program(case.source)
        for visit in _visits(program.statements):
            used.add(rule_key(visit.node))
    missing = set(RULES) - used
    assert not missing, f"no case file exercises the rules {sorted(missing)}"


def _visits(statements):
    from gradient_conformance.reference.program import Define, Loop
    for s in statements:
        if isinstance(s, Loop):
            yield from _visits(s.body)
        elif isinstance(s, Define) and s.expansion:
            yield from s.expansion.visits


def test_a_wrong_expectation_fails():
    """The checker itself can fail: a case whose expected bits are off by one ulp."""
    case = cases.parse_case("#: in 0 = 2.0\n#: out 1 = 4.0000005\n"
                            "%i = buffer slot=0 dtype=f32 shape=[]\n"
                            "%o = buffer slot=1 dtype=f32 shape=[]\n"
                            "%x = load %i\n%y = mul %x %x\nstore %o %y\n")
    ok, why = cases.check(case, reference.build)
    assert not ok and "slot 1" in why


def test_every_case_passes_under_the_rational_backend(monkeypatch):
    """Where gmpy2 is missing the reference computes with the rational backend: every case
    file passes with it too."""
    from gradient_conformance.reference import exact
    monkeypatch.setattr(exact, "BACKEND", exact.Rational())
    failures = []
    for path in OWN + SHARED:
        ok, why = cases.check(cases.load_case(path), reference.build)
        if not ok:
            failures.append(f"{path.name}: {why}")
    assert not failures, failures
