"""The public strategies check their arguments as Hypothesis checks its own: a bad bound is
InvalidArgument naming the argument, raised when the strategy is made (docs/generators.md,
"Generators"). Each case here drew something other than what was asked before."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis.errors import InvalidArgument

from gradient_conformance.generators import (
    differentiable_programs,
    exact_programs,
    invalid_gradients,
    near_misses,
    order_sensitive_gradients,
    programs,
)
from gradient_conformance.generators.tapes import (
    invalid_tapes,
    order_sensitive_tapes,
    single_use_tapes,
    tapes,
)
from gradient_conformance.reference import errors

BAD = [
    (programs, dict(min_steps=5, max_steps=2), "min_steps=5 is more than max_steps=2"),
    (programs, dict(min_steps=0), "min_steps=0 must be at least 1"),
    (programs, dict(max_steps=2.5), "max_steps=2.5 must be a whole number"),
    (programs, dict(max_steps=True), "max_steps=True must be a whole number"),
    (programs, dict(exclude={"nosuchop"}), "exclude names 'nosuchop'"),
    (programs, dict(exclude="add"), "exclude='add' must be a collection"),
    (programs, dict(dtypes=("i32",)), "must include 'f32'"),
    (programs, dict(dtypes=("f64", "f32")), "dtypes names 'f64'"),
    (programs, dict(shapes=()), "shapes is empty"),
    (programs, dict(shapes=((-1,),)), "shapes holds (-1,)"),
    (programs, dict(shapes=((2, 1.0),)), "each a whole number of at least 0"),
    (programs, dict(shapes=((1, 1, 1, 1, 2),)), "at most 4 dims"),
    (programs, dict(inputs="smoothish"), "inputs='smoothish' must be one of"),
    (exact_programs, dict(min_steps=3, max_steps=1), "min_steps=3 is more than max_steps=1"),
    (differentiable_programs, dict(min_gradients=-1), "min_gradients=-1 must be at least 0"),
    (differentiable_programs, dict(store_values="yes"), "store_values='yes'"),
    (order_sensitive_gradients, dict(min_shares=6, max_shares=3),
     "min_shares=6 is more than max_shares=3"),
    (order_sensitive_gradients, dict(min_shares=2), "min_shares=2 must be at least 3"),
    (invalid_gradients, dict(rules=["nope"]), "rules names 'nope'"),
    (invalid_gradients, dict(rules=[]), "rules is empty"),
    (invalid_gradients, dict(max_noise=-1), "max_noise=-1 must be at least 0"),
    (near_misses, dict(max_noise="3"), "max_noise='3' must be a whole number"),
    (tapes, dict(min_entries=4, max_entries=2), "min_entries=4 is more than max_entries=2"),
    (tapes, dict(smooth=1), "smooth=1 must be True or False"),
    (single_use_tapes, dict(max_leaves=0), "max_leaves=0 must be at least 1"),
    (order_sensitive_tapes, dict(max_extra=-2), "max_extra=-2 must be at least 0"),
    (invalid_tapes, dict(max_entries=0), "max_entries=0 must be at least 1"),
]


@pytest.mark.parametrize(("strategy", "arguments", "said"), BAD,
                         ids=[f"{s.__name__}-{'-'.join(a)}" for s, a, _ in BAD])
def test_a_bad_argument_is_an_invalid_argument_naming_it(strategy, arguments, said):
    with pytest.raises(InvalidArgument) as raised:
        strategy(**arguments)
    assert said in str(raised.value)


@settings(max_examples=30, derandomize=True)
@given(case=programs(min_steps=3, max_steps=3, exclude={"call", "range"}))
def test_good_bounds_are_kept(case):
    assert "call" not in case.features and "range" not in case.features


@settings(max_examples=10, derandomize=True)
@given(case=order_sensitive_gradients(min_shares=4, max_shares=4))
def test_the_shares_asked_for_are_drawn(case):
    assert "receives 4 shares" in case.description


@settings(max_examples=20, derandomize=True)
@given(case=invalid_gradients(rules={errors.NO_RULE}))
def test_a_set_of_rules_is_drawn_from(case):
    assert case.expect_error == errors.NO_RULE
