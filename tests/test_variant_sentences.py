"""A variant's code against its own sentence, on programs that show it (issue 53): what
its sentence says it computes, worked out here without its code (numpy's IEEE f32
arithmetic, the oracle's correctly rounded transcendentals, or the spec on the program the
sentence describes), is what the variant gives, on a program where it departs from the
spec. `nonscalar-loss-summed` ("summing it implicitly") gave 1.0 for the loss
`expand %x shape=[2]`, where summing gives 2.0. Here: the two summing rejections, the nine
rule forms, seven rules and ops of structure, five arithmetic variants and the two sums;
test_variant_sentences_walk.py and test_variant_sentences_rules.py take the rest, and the
last test below holds that every variant of the catalogue is taken by one of the three."""

from __future__ import annotations

import numpy as np
import pytest

from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.reference import exact
from tests.sentences import f32_of

# Losses that are f32 but no scalar, each of x (an f32 of shape [3]) or of its first element.
LOSSES = {
    "expand of a scalar": ("%e = reduce %x op=max", "%y = expand %e shape=[2]"),
    "expand to two axes": ("%e = reduce %x op=add", "%y = expand %e shape=[2,3]"),
    "a vector": ("%e = mul %x %x", "%y = mul %e 0.5"),
    "a shape [1]": ("%e = reduce %x op=add axis=[0]", "%y = mul %e %e"),
}
SUMMING = ["nonscalar-loss-summed", "without-loss-not-f32-scalar"]


def _program(loss: tuple[str, str], summed: bool) -> str:
    body = "\n".join(loss)
    last = "%l = reduce %y op=add\n%g = gradient %l %x" if summed else "%g = gradient %y %x"
    return ("%a = buffer slot=0 dtype=f32 shape=[3]\n%o = buffer slot=1 dtype=f32 shape=[3]\n"
            f"%x = load %a\n{body}\n{last}\nstore %o %g\n")


@pytest.mark.parametrize("name", SUMMING)
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_a_variant_that_sums_a_loss_gives_the_gradient_of_its_sum(name, loss):
    buffers = {0: np.array([1.5, -2.0, 0.75], np.float32), 1: np.zeros(3, np.float32)}
    implicit = Reading(_program(LOSSES[loss], summed=False))
    explicit = Reading(_program(LOSSES[loss], summed=True))
    assert implicit.outcome(buffers).status == "rejected"  # the spec's: a rule's rejection
    theirs = implicit.outcome(buffers, CATALOGUE[name].semantics())
    summed = explicit.outcome(buffers)
    assert theirs.status == summed.status == "ok"
    assert theirs.buffers[1].tobytes() == summed.buffers[1].tobytes(), \
        (theirs.buffers[1], summed.buffers[1])


# --- the rules' forms and the arithmetic, each computed from the variant's own words -------
#
# Each row: a variant, a program, and its sentence as arithmetic, written here with numpy's
# IEEE f32 operations (+, *, /, sqrt are correctly rounded) and the oracle's correctly rounded
# exp2, log2, sin and cos; never the variant's own code. The loss weighs u by w, so the share
# a rule receives is g = w.

F32 = np.float32



def _b(value) -> int:
    return int(np.array([value], np.float32).view(np.uint32)[0])


LN2, HALF_PI = F32(0.6931472), F32(1.5707964)


def _unary(op: str) -> str:
    return ("%a = buffer slot=0 dtype=f32 shape=[]\n%w = buffer slot=1 dtype=f32 shape=[]\n"
            "%o = buffer slot=2 dtype=f32 shape=[]\n%x = load %a\n%v = load %w\n"
            f"%u = {op} %x\n%l = mul %u %v\n%g = gradient %l %x\nstore %o %g\n")


def _rounded(function, a: np.float32) -> np.float32:
    return f32_of(function(_b(a)))


RULE_FORMS = {  # variant: (op, its share from the sentence, as a function of a and g)
    "recip-neg-div": ("recip", lambda a, g: -(g / (a * a))),
    "recip-neg-first": ("recip", lambda a, g: ((g * F32(-1)) * (F32(1) / a)) * (F32(1) / a)),
    "recip-form": ("recip", lambda a, g: (g * F32(-1)) * (F32(1) / (a * a))),
    "sqrt-div": ("sqrt", lambda a, g: g / (F32(2) * np.sqrt(a))),
    "sqrt-half-div": ("sqrt", lambda a, g: (g * F32(0.5)) / np.sqrt(a)),
    "exp2-product": ("exp2", lambda a, g: g * (_rounded(exact.f32_exp2, a) * LN2)),
    "log2-div": ("log2", lambda a, g: g / (a * LN2)),
    "sin-cos": ("sin", lambda a, g: g * _rounded(exact.f32_cos, a)),
    "sin-reflected": ("sin", lambda a, g: g * _rounded(exact.f32_sin, HALF_PI - a)),
}
POINTS = [(F32(0.7), F32(1.3)), (F32(3.1), F32(-0.37)), (F32(1e-3), F32(7.5)),
          (F32(12.25), F32(0.1)), (F32(0.7), F32(0.1)), (F32(5.3), F32(1.3))]


@pytest.mark.parametrize("name", sorted(RULE_FORMS))
def test_a_rule_form_gives_the_share_its_sentence_writes(name):
    op, share = RULE_FORMS[name]
    reading = Reading(_unary(op))
    told_apart = False
    for a, g in POINTS:
        buffers = {0: np.array(a, F32), 1: np.array(g, F32), 2: np.zeros((), F32)}
        with np.errstate(all="ignore"):
            want = F32(share(a, g))
        theirs = reading.outcome(buffers, CATALOGUE[name].semantics())
        got = theirs.buffers[2][()]
        assert _b(got) == _b(want), (name, float(a), float(g), float(got), float(want))
        told_apart |= _b(got) != _b(reading.outcome(buffers).buffers[2][()])
    assert told_apart, f"{name}: no point where its form rounds apart from the spec's"


def _binary(op: str, dtype: str = "f32") -> str:
    return (f"%a = buffer slot=0 dtype={dtype} shape=[4]\n%b = buffer slot=1 dtype={dtype} "
            f"shape=[4]\n%o = buffer slot=2 dtype={dtype} shape=[4]\n%x = load %a\n"
            f"%y = load %b\n%z = {op} %x %y\nstore %o %z\n")


NAN = F32("nan")
ARITHMETIC = {  # variant: (program, inputs, its results from the sentence)
    "max-first-on-zeros": (_binary("max"), ([-0.0, 0.0, 1.0, -2.0], [0.0, -0.0, 3.0, -1.0]),
                           [-0.0, 0.0, 3.0, -1.0]),
    "max-second-on-zeros": (_binary("max"), ([-0.0, 0.0, 1.0, -2.0], [0.0, -0.0, 3.0, -1.0]),
                            [0.0, -0.0, 3.0, -1.0]),
    "max-ignores-nan": (_binary("max"), ([NAN, 1.0, NAN, 2.0], [1.0, NAN, NAN, 5.0]),
                        [1.0, 1.0, NAN, 5.0]),
    "idiv-floors": (_binary("idiv", "i32"), ([-7, 7, -7, 6], [2, -2, -2, 3]), [-4, -4, 3, 2]),
    "mod-divisor-sign": (_binary("mod", "i32"), ([-7, 7, -7, 6], [2, -2, -2, 3]),
                         [1, -1, -1, 0]),
}


@pytest.mark.parametrize("name", sorted(ARITHMETIC))
def test_an_arithmetic_variant_gives_what_its_sentence_says(name):
    source, (left, right), results = ARITHMETIC[name]
    reading = Reading(source)
    dtype = F32 if "dtype=f32" in source else np.int32
    buffers = {0: np.array(left, dtype), 1: np.array(right, dtype), 2: np.zeros(4, dtype)}
    got = reading.outcome(buffers, CATALOGUE[name].semantics()).buffers[2]
    want = np.array(results, dtype)
    same = got.view(np.uint32) == want.view(np.uint32)
    assert (same | (np.isnan(got) & np.isnan(want)) if dtype is F32 else same).all(), \
        (name, got, want)
    assert got.tobytes() != reading.outcome(buffers).buffers[2].tobytes()


def test_a_sum_in_binary64_and_numpy_s_sum_are_what_their_sentences_say():
    """`sums-in-binary64` (summed in binary64, rounded once) and `numpy-sum` (as numpy does)
    on the row of cases/ops/reduce_long_row.ir, computed by numpy itself."""
    row = np.array([1e8, *[1.0] * 7, -1e8, *[1.0] * 7], F32)
    source = ("%a = buffer slot=0 dtype=f32 shape=[16]\n%o = buffer slot=1 dtype=f32 "
              "shape=[]\n%x = load %a\n%s = reduce %x op=add\nstore %o %s\n")
    reading = Reading(source)
    buffers = {0: row, 1: np.zeros((), F32)}
    for name, want in (("sums-in-binary64", F32(row.astype(np.float64).sum())),
                       ("numpy-sum", np.add.reduce(row))):
        got = reading.outcome(buffers, CATALOGUE[name].semantics()).buffers[1][()]
        assert _b(got) == _b(want), (name, float(got), float(want))


def _two(body: str, wrt: str) -> str:
    """x and y scalars, w the weight of the loss; the gradient against `wrt` in slot 3."""
    return ("%a = buffer slot=0 dtype=f32 shape=[]\n%b = buffer slot=1 dtype=f32 shape=[]\n"
            "%c = buffer slot=2 dtype=f32 shape=[]\n%o = buffer slot=3 dtype=f32 shape=[]\n"
            f"%x = load %a\n%y = load %b\n%w = load %c\n{body}\n%l = mul %u %w\n"
            f"%g = gradient %l {wrt}\nstore %o %g\n")


# variant: (body computing %u from %x and %y, x, y, w, {wrt: the gradient its sentence gives})
STRUCTURE = {
    "max-tie-first": ("%u = max %x %y", 2.0, 2.0, 1.5, {"%x": 1.5, "%y": 0.0}),
    "max-tie-both": ("%u = max %x %y", 2.0, 2.0, 1.5, {"%x": 1.5, "%y": 1.5}),
    "where-both": ("%k = cmplt %x %y\n%u = where %k %x %y", 1.0, 2.0, 1.5,
                   {"%x": 1.5, "%y": 1.5}),
    "detach-passes": ("%d = detach %x\n%u = mul %d %y", 3.0, 2.0, 1.5, {"%x": 3.0}),
    "same-operand-once": ("%u = mul %x %x", 3.0, 0.0, 1.5, {"%x": 4.5}),
    "add-zero-folded": ("%u = add %x 0.0", -0.0, 0.0, 1.0, {}),
    "recip-times-x-is-one": ("%r = recip %x\n%u = mul %r %x", 0.0, 0.0, 1.0, {}),
}
VALUES = {"add-zero-folded": -0.0, "recip-times-x-is-one": 1.0}  # %u, from the sentence


@pytest.mark.parametrize("name", sorted(STRUCTURE))
def test_a_rule_or_an_op_does_what_its_sentence_says(name):
    body, x, y, w, gradients = STRUCTURE[name]
    buffers = {0: np.array(x, F32), 1: np.array(y, F32), 2: np.array(w, F32),
               3: np.zeros((), F32)}
    semantics = CATALOGUE[name].semantics()
    differs = False
    for wrt, want in gradients.items():
        reading = Reading(_two(body, wrt))
        got = reading.outcome(buffers, semantics).buffers[3][()]
        assert _b(got) == _b(F32(want)), (name, wrt, float(got), want)
        differs |= _b(got) != _b(reading.outcome(buffers).buffers[3][()])
    if name in VALUES:  # the value itself, stored
        reading = Reading(_two(body, "%x").replace("store %o %g", "store %o %u"))
        got = reading.outcome(buffers, semantics).buffers[3][()]
        assert _b(got) == _b(F32(VALUES[name])), (name, float(got))
        differs |= _b(got) != _b(reading.outcome(buffers).buffers[3][()])
    assert differs, f"{name}: the program does not show it"


COVERED = {*SUMMING, *RULE_FORMS, *ARITHMETIC, "sums-in-binary64", "numpy-sum", *STRUCTURE}


def test_every_variant_of_the_catalogue_is_held_to_its_sentence():
    from tests import test_variant_sentences_rules as rules
    from tests import test_variant_sentences_walk as walk
    covered = COVERED | walk.COVERED | rules.COVERED
    assert covered <= set(CATALOGUE), sorted(covered - set(CATALOGUE))
    assert not set(CATALOGUE) - covered, sorted(set(CATALOGUE) - covered)
