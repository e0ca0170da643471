"""A fault written to look like a variant on one program only: the where rule sends -0.0,
not +0.0, to the unselected side. Where g is -0.0 this is the variant where-both ("sends g
to both values of a where"); anywhere else it is not, so the diagnosis must not name it
(docs/diagnosis.md, "Confirmation")."""

import dataclasses

from gradient_conformance import reference
from gradient_conformance.reference import rules

NAME = "where-negative-zero"


def _where(e, u, g, k):
    c = u.operands[0]
    return None if k == 0 else e("where", c, g, e.f32("-0.0")) if k == 1 else \
        e("where", c, e.f32("-0.0"), g)


SEMANTICS = dataclasses.replace(reference.SPEC, rules={**rules.RULES, "where": _where})


def build(source):
    return reference.build(source, SEMANTICS)
