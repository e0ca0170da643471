"""A student's literal reader: a decimal literal cut to its first 19 significant digits (as a
64-bit integer mantissa holds them), then rounded once to f32. It agrees with rounding
through binary64 first wherever the digits past the 19th decide nothing; a tie whose
digits past the 19th decide (cases/ops/literals_past_nineteen_digits.ir) tells them apart
(issue 53: it was named `literals-through-binary64`)."""

import dataclasses
from decimal import ROUND_DOWN, Context, Decimal

from gradient_conformance import reference
from gradient_conformance.reference import exact
from gradient_conformance.reference.semantics import SPEC

NAME = "literals to 19 digits"


def _literal(text: str) -> int:
    if text.lstrip("-") in ("inf", "nan"):
        return exact.f32_from_text(text)
    cut = Context(prec=19, rounding=ROUND_DOWN).plus(Decimal(text))
    return exact.f32_from_text(str(cut))


SEMANTICS = dataclasses.replace(SPEC, literal=_literal)


def build(source):
    return reference.build(source, SEMANTICS)
