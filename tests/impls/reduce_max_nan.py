"""A fault written to look like a variant on one program only: reduce op=max's rule divides
g among the maxima by max(count, 1), so where the maximum is NaN (no element equals it) every
share is 0, not the spec's NaN. There it is the variant reduce-max-all ("all of g to every
maximum"); at a tie it is not, so the diagnosis must not name it (docs/diagnosis.md,
"Confirmation")."""

import dataclasses

from gradient_conformance import reference
from gradient_conformance.reference import rules

NAME = "reduce-max-nan"


def _reduce_max(e, u, g, k):
    a = u.operands[0]
    axis, shape = u.attr("axis"), a.shape
    m = e("where", e("cmpne", a, e("expand", u, shape=shape)), e.f32("0.0"), e.f32("1.0"))
    count = e("max", e("reduce", m, op="add", axis=axis), e.f32("1.0"))
    return e("mul", e("mul", m, e("recip", e("expand", count, shape=shape))),
             e("expand", g, shape=shape))


SEMANTICS = dataclasses.replace(reference.SPEC,
                                rules={**rules.RULES, "reduce.max": _reduce_max})


def build(source):
    return reference.build(source, SEMANTICS)
