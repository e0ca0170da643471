"""What an implementation may declare of itself beyond ops and ulps: ops by dtype, integer
division that traps, gradients in float64, the environment it needs; and that the suite's
own libraries stay out of its process. SPEC.md, "The protocol"; docs/isolation.md, "Isolation".
"""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given, settings

from gradient_conformance.conformance.readings import Reading
from gradient_conformance.conformance.transports.confinement import (
    Confinement,
    default_memory_limit,
)
from gradient_conformance.conformance.transports.loading import (
    LoadFailed,
    checked_capabilities,
    load,
)
from gradient_conformance.generators import programs
from gradient_conformance.reference.ops import FEATURES
from tests.conftest import FAST, ROOT, suite

AND_OF_BOOLS = """%a = buffer slot=0 dtype=bool shape=[2]
%b = buffer slot=1 dtype=i32 shape=[2]
%x = load %a
%y = and %x %x
%i = load %b
%j = and %i 3
"""


def test_ops_by_dtype_are_features_and_a_built_program_names_them():
    assert {"and:bool", "and:i32", "cmpne:bool", "where:f32"} <= FEATURES
    assert "and:f32" not in FEATURES and "sin:f32" not in FEATURES  # one dtype: the op says it
    assert {"and:bool", "and:i32"} <= Reading(AND_OF_BOOLS).uses
    assert not any(":" in f for f in Reading(AND_OF_BOOLS).features)  # the op table's
    assert checked_capabilities({"unsupported": ["and:bool"]})["unsupported"] == ["and:bool"]
    with pytest.raises(LoadFailed, match=r"and:f32"):
        checked_capabilities({"unsupported": ["and:f32"]})


@settings(max_examples=150, deadline=None)
@given(case=programs(exclude=frozenset({"and:bool", "or:bool", "xor:bool", "cmpne:i32"})))
def test_programs_leave_out_an_op_on_the_dtype_excluded_and_keep_it_on_others(case):
    features = Reading(case.source, case.parsed).uses
    assert not features & {"and:bool", "or:bool", "xor:bool", "cmpne:i32"}


def test_an_op_excluded_on_one_dtype_is_still_generated_on_another():
    from hypothesis import find
    find(programs(exclude=frozenset({"and:bool"})),
         lambda case: "and:i32" in Reading(case.source, case.parsed).uses,
         settings=settings(max_examples=2000, database=None))


@pytest.mark.parametrize("claim, says", [
    ({"integer_division_traps": "yes"}, "must be True or False"),
    ({"float64_gradients": True}, "declare 'bit_exact_gradients': False"),
    ({"environment": ["OK", "not a name"]}, "environment variable names"),
    ({"environment": "HOME"}, "environment variable names"),
])
def test_a_claim_the_suite_cannot_read_is_a_usage_error(claim, says):
    with pytest.raises(LoadFailed, match=says):
        checked_capabilities(claim)
    assert checked_capabilities({"float64_gradients": True, "bit_exact_gradients": False})[
        "float64_gradients"]


def test_a_required_variable_is_the_user_s_to_pass_on(monkeypatch):
    """tests/impls/traps.py asks for TRAPS_DECLARED: set but not passed, the load fails
    naming the option that passes it (the implementation chooses none of the user's
    environment: docs/isolation.md, "The environment is the user's"); passed but unset, it
    fails naming it; set and passed, it reads it (its claim follows it)."""
    monkeypatch.setenv("TRAPS_DECLARED", "0")
    with pytest.raises(LoadFailed, match=r"asks for the environment variable TRAPS_DECLARED .*"
                       r"add --pass-env=TRAPS_DECLARED"):
        load("tests.impls.traps", base=str(ROOT))
    passing = Confinement(default_memory_limit(), pass_env=("TRAPS_DECLARED",))
    monkeypatch.delenv("TRAPS_DECLARED")
    with pytest.raises(LoadFailed, match="requires the environment variable TRAPS_DECLARED"):
        load("tests.impls.traps", base=str(ROOT), confinement=passing)
    monkeypatch.setenv("TRAPS_DECLARED", "0")
    impl = load("tests.impls.traps", base=str(ROOT), confinement=passing)
    try:
        assert impl.capabilities["integer_division_traps"] is False
        assert "TRAPS_DECLARED" in impl.confinement.pass_env
    finally:
        impl.close()


def test_the_implementation_s_process_has_no_gmpy2_unless_it_loads_it(monkeypatch):
    """The kit parses with the reference; in the suite's process that rounds with gmpy2, in
    the implementation's with the rational backend, so GMP's handlers are not there."""
    monkeypatch.setenv("TRAPS_DECLARED", "1")
    impl = load("tests.impls.traps", base=str(ROOT),
                confinement=Confinement(default_memory_limit(), pass_env=("TRAPS_DECLARED",)))
    try:
        assert impl.version == "gmpy2 False"
    finally:
        impl.close()


def test_a_trapping_division_is_not_sent_where_declared_and_is_a_located_signal_where_not():
    checks = ["-k", "i32_c and test_case_file", "-rs"]
    checks.append("--pass-env=TRAPS_DECLARED")
    status, out, _ = suite("tests.impls.traps", *checks,
                           env={**os.environ, "TRAPS_DECLARED": "1"})
    assert status == 0, out
    assert "where the implementation declares that integer division traps" in out
    assert "integer division traps, as declared" in out
    status, out, _ = suite("tests.impls.traps", *checks,
                           env={**os.environ, "TRAPS_DECLARED": "0"})
    assert status == 1, out
    assert "killed by signal 8 SIGFPE" in out and "SIGFPE is an arithmetic trap" in out
    assert "gmp: overflow" not in out and "SIGABRT" not in out
    assert "location: line 26, `%q0 = idiv %d0 %e0`: the implementation's process is killed " \
           "by signal 8 SIGFPE from this statement on" in out


REPLAYED = """#: in 0 = 0x411025fc
#: out 1 = 0x3eceab69
#: out 2 = 0xbf6a37bb
%a = buffer slot=0 dtype=f32 shape=[]
%o = buffer slot=1 dtype=f32 shape=[]
%d = buffer slot=2 dtype=f32 shape=[]
%x = load %a
%y = sin %x
store %o %y
%g = gradient %y %x
store %d %g
"""


def test_replay_compares_as_the_checks_do(tmp_path):
    """numpy's float32 sin of 0x411025fc is 1 ulp from the correctly rounded 0x3eceab69, and
    the autograd adapter declares 2 ulps for sin; its gradient (cos, 0xbf6a37ba) is 1 ulp
    from the bits the file says, which it does not claim, and within the derivative bound."""
    from gradient_conformance.conformance.commands.replay import replay
    path = tmp_path / "sin.ir"
    path.write_text(REPLAYED)
    impl = load("gradient_conformance.adapters.autograd_impl", base=str(ROOT))
    try:
        agrees, text = replay(impl, str(path))
    finally:
        impl.close()
    assert agrees, text
    assert "compared within the 2 ulps declared for sin" in text
    assert "slots [2]: made from a gradient" in text and "within the bound of the truth" in text
    far = tmp_path / "far.ir"
    far.write_text(REPLAYED.replace("0xbf6a37bb", "0xbf7a37bb"))
    impl = load("gradient_conformance.adapters.autograd_impl", base=str(ROOT))
    try:
        agrees, text = replay(impl, str(far))
    finally:
        impl.close()
    assert agrees, "the file's own gradient bits are not what the check compares"


def test_fixed_programs_run_without_hypothesis_s_assume():
    """The fixed programs of test_forward.py and test_gradient_bits.py are not drawn by
    Hypothesis: they never call its assume, which outside a test is deprecated (15 warnings
    on a student's screen, until 2026-12-05); one that reaches a trapping division is a skip
    saying why (below)."""
    status, out, _ = suite(FAST, "-k", "every_axis_set or forward_error", "-W",
                           "error::hypothesis.errors.HypothesisDeprecationWarning")
    assert status == 0, out[-3000:]
    assert "warning" not in out.splitlines()[-1], out[-2000:]


def test_a_fixed_program_that_would_trap_is_a_skip_and_a_drawn_one_a_rejection():
    import numpy as np
    from hypothesis import strategies as st

    from gradient_conformance.conformance import running

    class Trapping:
        def __init__(self):
            self.capabilities = {"integer_division_traps": True}

        def unsupported(self):
            return set()

        def run_case(self, *args):
            raise AssertionError("a run that traps was sent")
    source = ("%a = buffer slot=0 dtype=i32 shape=[]\n%o = buffer slot=1 dtype=i32 shape=[]\n"
              "%x = load %a\n%q = idiv %x 0\nstore %o %q\n")
    buffers = {0: np.array(7, np.int32), 1: np.array(0, np.int32)}
    with pytest.raises(pytest.skip.Exception, match=re.escape(
            "idiv.by-zero, where the implementation declares that integer division traps")):
        running.run_both(Trapping(), source, buffers)
    ran = []

    @settings(max_examples=5, database=None)
    @given(st.just(0))
    def drawn(_):
        ran.append(1)
        running.run_both(Trapping(), source, buffers)
    with pytest.raises(Exception, match=r"Unable to satisfy|Unsatisfiable|assumptions"):
        drawn()
    assert ran


def test_an_op_declared_unsupported_at_a_dtype_is_left_out_by_every_check():
    """Before, a system declaring `max:f32` unsupported failed test_forward_error_per_op[max]
    on `max 0.0 %x`: the fixed programs were sent whatever the claim. Every check, with the
    whole catalogue of checks run, now leaves out what `unsupported` names, by op and by
    dtype, saying why."""
    impl = str(ROOT / "tests" / "impls" / "no_f32_max.py")
    code, output, _ = suite(impl, "--max-examples=10", "--no-shrink", "-rs")
    assert code == 0, output[-3000:]
    assert "which the implementation declares unsupported" in output and "max:f32" in output
