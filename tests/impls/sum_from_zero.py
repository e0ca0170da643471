"""A student's reduce: every f32 row of `reduce op=add` folds left from a +0.0 start, not
from its first element. It differs from the spec only on a row whose every element is -0.0
(the spec's sum is -0.0, this one's +0.0), where numpy's sum (pairwise, from +0.0) gives the
same; a row of eight or more tells them apart (cases/ops/reduce_long_row.ir), where this
one folds left as the spec does (issue 53: it was named `numpy-sum`)."""

import dataclasses

from gradient_conformance import reference
from gradient_conformance.reference import exact
from gradient_conformance.reference.interp import ExactF32, fold_row
from gradient_conformance.reference.semantics import SPEC

NAME = "sum from zero"


def _fold(op, step, row):
    if op != "add.f32":
        return fold_row(op, step, row)
    total = exact.POS_ZERO
    for value in row:
        total = exact.f32_add(total, value)
    return total


class _FromZero(ExactF32):
    fold_row = staticmethod(_fold)


SEMANTICS = dataclasses.replace(SPEC, domain=_FromZero())


def build(source):
    return reference.build(source, SEMANTICS)
