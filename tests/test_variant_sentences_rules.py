"""The rules', values', text form's, loops', functions' and rejections' variants against their
own sentences (issue 53): each row is a program where the variant departs from the spec, and
what its sentence says it gives there, worked out here with numpy's f32 arithmetic or by
hand in a comment, never with the variant's code. A rejection's variant that "accepts" a
program is held to the value its sentence implies where it implies one."""

from __future__ import annotations

import numpy as np
import pytest

from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.generators.hard_to_round import HARD_TO_ROUND
from tests.sentences import ACCEPTED, F32, REJECTED, f32_of, fold, pairwise, program, shows


def _scalar_loss(op_lines: str, x_shape: str = "[]", out_shape: str | None = None,
                 extra: tuple = ()) -> str:
    """x of `x_shape`, w a scalar weight; `op_lines` make %u; the loss is reduce(u) * w (or
    u * w for a scalar u) and its gradient against x is stored."""
    reduce = "" if x_shape == "[]" and "reduce" not in op_lines else "%r = reduce %u op=add\n"
    weighed = "%l = mul %r %w" if reduce else "%l = mul %u %w"
    body = f"{op_lines}\n{reduce}{weighed}\n%g = gradient %l %x"
    return program([("x", "f32", x_shape), ("w", "f32", "[]"), *extra], body,
                   ("f32", out_shape or x_shape), "%g")


ROW = [[1e8, 1.0, 1.0], [-1e8, 1.0, 1.0]]  # sums 2.0 row-major, 0.0 row by row
W = 1.5

RULES = {  # variant: (program, inputs, the gradient its sentence gives)
    # all of g to each of the two maxima (the spec shares it: 0.75 each)
    "reduce-max-all": (_scalar_loss("%u = reduce %x op=max", "[3]"),
                       [[2.0, 2.0, 1.0], W], [W, W, 0.0]),
    "reduce-max-first": (_scalar_loss("%u = reduce %x op=max", "[3]"),
                         [[2.0, 2.0, 1.0], W], [W, 0.0, 0.0]),
    # relu's step: nothing at the tie x = 2.0 (the spec: g * 0.5)
    "max-literal-step": (_scalar_loss("%u = max %x 2.0"), [2.0, W], 0.0),
    # expand's share is the reduce of v over [2,3]: row by row (last axis first), 1e8 and
    # -1e8, then 0.0; the spec folds row-major: 2.0
    "expand-axis-by-axis": (program([("x", "f32", "[]"), ("v", "f32", "[2,3]")],
                                    "%e = expand %x shape=[2,3]\n%m = mul %e %v\n"
                                    "%l = reduce %m op=add\n%g = gradient %l %x",
                                    ("f32", "[]"), "%g"), [W, ROW], 0.0),
    # the share mul g w = 1.0 * 1e-40 is subnormal: flushed to +0.0
    "rules-flush-subnormals": (_scalar_loss("%u = mul %x %x"), [1.0, 1e-40], 0.0),
    # through the casts as if they were not there: g = w (the spec: a dead end, 0.0)
    "i32-cast-passes": (_scalar_loss("%c = cast %x dtype=i32\n%u = cast %c dtype=f32"),
                        [2.5, W], W),
    "bitcast-round-trip-passes": (_scalar_loss("%c = bitcast %x dtype=i32\n"
                                               "%u = bitcast %c dtype=f32"), [2.5, W], W),
    # passes nothing through reduce op=mul, so x's gradient is mul's 3.0 alone
    "without-no-rule": (program([("x", "f32", "[3]")],
                                "%p = reduce %x op=mul\n%m = mul %x 3.0\n%s = reduce %m op=add\n"
                                "%l = add %p %s\n%g = gradient %l %x", ("f32", "[3]"), "%g"),
                        [[1.0, 2.0, 4.0]], [3.0, 3.0, 3.0]),
    # reduce op=mul's share as add's: expand g, g = w
    "reduce-mul-as-add": (_scalar_loss("%u = reduce %x op=mul", "[3]"),
                          [[1.0, 2.0, 4.0], W], [W, W, W]),
    # x stored, loaded, stored again and loaded as %q: q is not seen to depend on x, so the
    # loss q * x passes x only the share g * q = q = x
    "memory-one-hop": (program([("x", "f32", "[]"), ("s", "f32", "[]"), ("t", "f32", "[]")],
                               "store %s_buffer %x\n%p = load %s_buffer\nstore %t_buffer %p\n"
                               "%q = load %t_buffer\n%l = mul %q %x\n%g = gradient %l %x",
                               ("f32", "[]"), "%g"), [3.0, 0.0, 0.0], 3.0),
    # in a range body, the loss x * detach(load) depends on the range only through the detach:
    # accepted, and its gradient is the loaded element
    "open-range-not-through-detach": (program([("x", "f32", "[]"), ("v", "f32", "[2]")],
                                              "%i = range 2\n%e = load %v_buffer %i\n"
                                              "%d = detach %e\n%l = mul %x %d\n"
                                              "%g = gradient %l %x\nstore %o %g %i\nend %i",
                                              ("f32", "[2]"), None),
                                      [1.0, [0.25, -4.0]], [0.25, -4.0]),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_a_rule_gives_the_gradient_its_sentence_says(name):
    source, values, want = RULES[name]
    shows(name, source, values, want)


def test_memory_one_hop_still_sees_one_store():
    """One store deep is seen: x stored and loaded back is rejected, as by the spec."""
    source = program([("x", "f32", "[]"), ("s", "f32", "[]")],
                     "store %s_buffer %x\n%p = load %s_buffer\n%l = mul %p %x\n"
                     "%g = gradient %l %x", ("f32", "[]"), "%g")
    buffers = {0: np.array(3.0, F32), 1: np.zeros((), F32), 2: np.zeros((), F32)}
    assert Reading(source).outcome(buffers, CATALOGUE["memory-one-hop"].semantics()).status \
        == "rejected"


def _stored(op_lines: str, x_shape: str, out_shape: str, dtype: str = "f32") -> str:
    return program([("x", dtype, x_shape)], op_lines, (dtype, out_shape), "%u")



LONG = [1e8, 1.0, 1.0, 1.0, -1e8, 1.0, 1.0, 1.0]
MIDDLE = np.arange(12, dtype=F32).reshape(2, 3, 2)
MULS = [1e30, 1e10, 1e-30]

VALUES = {  # variant: (program, inputs, the value its sentence gives)
    "flush-results": (_stored("%u = mul %x %x", "[]", "[]"), [1e-20], 0.0),
    "flush-inputs": (_stored("%u = mul %x 1e30", "[]", "[]"), [1e-40], 0.0),
    "pairwise-reduce": (_stored("%u = reduce %x op=add", "[8]", "[]"), [LONG],
                        pairwise(LONG)),
    "max-zero-relu": (_stored("%u = max %x 0.0", "[3]", "[3]"), [[np.nan, 2.0, -3.0]],
                      [0.0, 2.0, 0.0]),
    # the last axis first: each row, then the rows
    "reduce-axis-by-axis": (_stored("%u = reduce %x op=add axis=[0,1]", "[2,3]", "[1,1]"),
                            [ROW], [[fold([fold(ROW[0]), fold(ROW[1])])]]),
    # the [2,3,2] operand read as if reshaped to [2,2,3] and each last row summed
    "reduce-middle-axis-reshaped": (_stored("%u = reduce %x op=add axis=[1]", "[2,3,2]",
                                            "[2,1,2]"), [MIDDLE],
                                    MIDDLE.reshape(2, 2, 3).sum(axis=2).reshape(2, 1, 2)),
    "reduce-mul-axis-reversed": (_stored("%u = reduce %x op=mul axis=[1]", "[1,3]", "[1,1]"),
                                 [[MULS]], [[F32(F32(F32(MULS[2]) * F32(MULS[1])) *
                                                 F32(MULS[0]))]]),
    # 1 + 2^-24 (+ 4.6e-18) rounds to 1 + 2^-24 in binary64, a tie, then to even: 1.0
    "literals-through-binary64": (program([], "", ("f32", "[]"), "1.00000005960464478"),
                                  [], F32(float("1.00000005960464478"))),
    # i32: an axis list in any order is the axes it names
    "axis-in-any-order": (_stored("%u = reduce %x op=add axis=[1,0]", "[2,2]", "[1,1]"),
                          [[[1.0, 2.0], [3.0, 4.0]]], [[10.0]]),
    # a negative count runs the body no times: %o keeps what it held (zeros)
    "negative-range-runs-none": (program([("x", "f32", "[]")],
                                         "%i = range -1\nstore %o 7.0\nend %i",
                                         ("f32", "[]"), None), [1.0], 0.0),
    # the body's %a is its own: 3x is stored
    "body-names-scoped": (program([("x", "f32", "[]")],
                                  "%a = mul %x 2.0\n%i = range 1\n%a = mul %x 3.0\n"
                                  "store %o %a\nend %i", ("f32", "[]"), None), [0.5], 1.5),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_a_value_is_what_its_sentence_says(name):
    source, values, want = VALUES[name]
    shows(name, source, values, want)


@pytest.mark.parametrize("op", ["exp2", "sin"])
def test_transcendentals_in_binary64_are_numpy_s_binary64_rounded(op):
    """Its sentence on the hard-to-round inputs, computed by numpy in binary64 and rounded
    once to f32: it departs from the spec on at least one of them."""
    inputs = [f32_of(bits) for bits in HARD_TO_ROUND[op]]
    function = {"exp2": np.exp2, "sin": np.sin}[op]
    want = np.array([F32(function(np.float64(a))) for a in inputs], F32)
    size = f"[{len(inputs)}]"
    shows("transcendentals-in-binary64", _stored(f"%u = {op} %x", size, size), [inputs], want)


REJECTIONS = {  # variant: (program, inputs, whether its sentence accepts or rejects it)
    "lowercase-exponent-only": (_stored("%u = mul %x 1E-3", "[]", "[]"), [1.0], REJECTED),
    "single-spaces": (_stored("%u = mul %x  2.0", "[]", "[]"), [1.0], REJECTED),
    # axis=[0] op=add read in the printer's order of keys, op first: op=[0], no op
    "attributes-by-position": (_stored("%u = reduce %x axis=[0] op=add", "[2]", "[1]"),
                               [[1.0, 2.0]], REJECTED),
    "function-names-global": (program([("x", "f32", "[]")],
                                      "def @f %p\n%a = mul %p 2.0\nreturn %a\nend @f\n"
                                      "%a = call @f %x", ("f32", "[]"), "%a"), [1.0], REJECTED),
    "without-x-not-f32": (program([("x", "f32", "[]")], "%l = mul %x 2.0\n"
                                  "%g = gradient %l %x_buffer", ("f32", "[]"), "%l"),
                          [1.0], ACCEPTED),
    "without-x-literal": (program([("x", "f32", "[]")], "%l = mul %x 2.0\n"
                                  "%g = gradient %l 2.0", ("f32", "[]"), "%g"), [1.0], ACCEPTED),
    "without-open-range": (program([("v", "f32", "[2]")], "%i = range 2\n%e = load %v_buffer %i\n"
                                   "%s = mul %e %e\n%g = gradient %s %e\nstore %o %g %i\nend %i",
                                   ("f32", "[2]"), None), [[1.0, 2.0]], ACCEPTED),
    "without-in-function": (program([("x", "f32", "[]")],
                                    "def @f %p\n%q = mul %p %p\n%g = gradient %q %p\nreturn %g\n"
                                    "end @f\n%a = call @f %x", ("f32", "[]"), "%a"),
                            [1.0], ACCEPTED),
    "rejects-independent-loss": (program([("x", "f32", "[]"), ("w", "f32", "[]")],
                                         "%l = mul %w 2.0\n%g = gradient %l %x",
                                         ("f32", "[]"), "%g"), [1.0, 2.0], REJECTED),
    "rejects-through-detach-or-cast": (program([("x", "f32", "[]")],
                                               "%d = detach %x\n%l = mul %d 2.0\n"
                                               "%g = gradient %l %x", ("f32", "[]"), "%g"),
                                       [1.0], REJECTED),
    "rejects-any-no-rule-node": (program([("x", "f32", "[]"), ("v", "f32", "[3]")],
                                         "%r = reduce %v op=mul\n%m = mul %x 2.0\n"
                                         "%l = add %m %r\n%g = gradient %l %x",
                                         ("f32", "[]"), "%g"), [1.0, [1.0, 2.0, 3.0]],
                                 REJECTED),
}


@pytest.mark.parametrize("name", sorted(REJECTIONS))
def test_a_program_is_accepted_or_rejected_as_its_sentence_says(name):
    source, values, want = REJECTIONS[name]
    shows(name, source, values, want)


COVERED = {*RULES, *VALUES, "transcendentals-in-binary64", *REJECTIONS}
