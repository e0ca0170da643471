"""The walk's, hash consing's and the tapes' variants against their own sentences (issue 53):
each expected value is a fold written here in the order the sentence names, with the order
the spec's walk takes derived by hand from gradient.md ("The walk") in a comment beside it.

The chain program: x a scalar, senders `u_k = mul %x c_k` for literals c_0 ... c_n-1,
and the loss `t = ((u_0 + u_1) + u_2) + ...`. Each u_k receives the literal 1.0, so x
receives the share `mul 1.0 c_k` = c_k exactly from u_k. The post-order from t, operands
left to right, is x c_0 u_0 c_1 u_1 t_1 c_2 u_2 t_2 ...; reversed, u_n-1 is visited first,
so x's shares arrive as c_n-1, ..., c_1, c_0: the reverse of the chain."""

from __future__ import annotations

import numpy as np
import pytest

from gradient_conformance.conformance.diagnosis.variants import CATALOGUE
from gradient_conformance.reference import tape as tapes
from tests.sentences import F32, f32_of, fold, pairwise, program, shows


def _chain(c: list[float], written: list[int] | None = None, before: str = "") -> str:
    """The chain over literals `c`, its senders written in the order `written` (indices
    into the chain; the chain's own order by default), `before` written ahead of them."""
    written = list(range(len(c))) if written is None else written
    senders = "\n".join(f"%u{k} = mul %x {_literal(c[k])}" for k in written)
    adds, last = [], "%u0"
    for k in range(1, len(c)):
        adds.append(f"%t{k} = add {last} %u{k}")
        last = f"%t{k}"
    body = f"{before}\n{senders}\n" + "\n".join(adds) + f"\n%g = gradient {last} %x"
    return program([("x", "f32", "[]")], body, ("f32", "[]"), "%g")


def _literal(value: float) -> str:
    return repr(float(F32(value)))


# Shares whose sum depends on the order (the ulp of 1e8 in f32 is 8), all distinct.
ROWS = [[3.0, 1e8, 5.0, -1e8, 1.0, 2e8, 7.0, -2e8, 0.5],
        [1e8, 1.0, 2.0, 3.0, -1e8, 5.0, 6.0, 4.0, 2e8]]
WRITTEN = [4, 0, 7, 2, 8, 1, 5, 3, 6]  # the senders' order in the text


def _arrival(c):
    return list(reversed(c))



ORDERS = {  # variant: (shares taken, their sum by the sentence, from the chain c)
    "program-order": (9, lambda c: fold(c, WRITTEN)),
    "reversed-program-order": (9, lambda c: fold(c, WRITTEN[::-1])),
    "reversed-arrival": (9, lambda c: fold(_arrival(c)[::-1])),
    "pairwise": (8, lambda c: pairwise(_arrival(c))),
    # as numpy sums 8 or more values: numpy's own sum of the arrival order is the witness
    "blocked-past-eight": (9, lambda c: np.add.reduce(np.array(_arrival(c), F32))),
    # with operands right to left the post-order is c_n-1 x u_n-1 c_n-2 u_n-2 ... c_0 u_0
    # t_1 ... t_n-1; reversed, the t's come first, then u_0, u_1, ...: the chain's order
    "operands-right-to-left": (9, lambda c: fold(c)),
}


@pytest.mark.parametrize("name", sorted(ORDERS))
def test_a_sum_of_shares_is_taken_in_the_order_its_sentence_names(name):
    size, total = ORDERS[name]
    told_apart = 0
    for c in ROWS:
        c = c[:size]
        written = [k for k in WRITTEN if k < size]
        source = _chain(c, written)
        want = total(c)
        try:
            shows(name, source, [F32(1.5)], want)
            told_apart += 1
        except AssertionError as problem:
            if "the spec gives the same" not in str(problem):
                raise
    assert told_apart, f"{name}: no row where its order sums apart from the spec's"


def test_creation_order_sums_a_share_made_before_the_gradient_first():
    """The share `mul 1.0 3.0` is the program's own node %k, made before the walk; the
    others are made as they arrive (c_2, then c_1). So the order is 3.0, -1e8, 1e8 (0.0),
    where arrival gives -1e8, 1e8, 3.0 (3.0)."""
    source = _chain([3.0, 1e8, -1e8], before="%k = mul 1.0 3.0")
    shows("creation-order", source, [F32(1.5)], fold([3.0, -1e8, 1e8]))


def test_fold_from_zero_starts_even_one_share_from_zero():
    """One share -0.0: the spec uses it as it is; 0.0 + -0.0 is +0.0."""
    source = _chain([-0.0])
    shows("fold-from-zero", source, [F32(1.5)], F32(0.0) + F32(-0.0))


def test_not_through_detach_visits_a_node_first_reached_through_a_detach_later():
    """t = d + u_1, r = t + u_2, s = r + u_3, d = detach u_3. The spec's post-order
    reaches u_3 through d: x c3 u3 d c1 u1 t c2 u2 r s, so x's shares arrive from u2, u1,
    u3. Without descending through d: d x c1 u1 t c2 u2 r c3 u3 s, so from u3, u2, u1."""
    c1, c2, c3 = 1.0, 1e8, -1e8
    body = (f"%u1 = mul %x {c1}\n%u2 = mul %x {c2}\n%u3 = mul %x {c3}\n%d = detach %u3\n"
            "%t = add %d %u1\n%r = add %t %u2\n%s = add %r %u3\n%g = gradient %s %x")
    source = program([("x", "f32", "[]")], body, ("f32", "[]"), "%g")
    shows("not-through-detach", source, [F32(2.0)], fold([c3, c2, c1]))


# --- hash consing ---------------------------------------------------------------------------

W = [("w", "f32", "[]")]
HASH_CONSING = {  # variant: (program, inputs, what the sentence gives)
    # equal nodes are not one: the gradient against %a does not count %b (3.0, not 8.0)
    "no-hash-consing": (program(W, "%a = mul %w 2.0\n%b = mul %w 2.0\n%u = mul %a 3.0\n"
                                "%v = mul %b 5.0\n%l = add %u %v\n%g = gradient %l %a",
                                ("f32", "[]"), "%g"), [0.5], 3.0),
    # the body's %b is kept apart from the outside's %a, although it is pure
    "scopes-kept-apart": (program(W, "%a = mul %w 2.0\n%i = range 1\n%b = mul %w 2.0\n"
                                  "%u = mul %a 3.0\n%v = mul %b 5.0\n%l = add %u %v\n"
                                  "%g = gradient %l %a\nstore %o %g\nend %i",
                                  ("f32", "[]"), None), [0.5], 3.0),
    # 0.0 is written first, so -0.0 is that node: -0.0 + 0.0 is +0.0
    "signed-zero-literals-merged": (program([("x", "f32", "[]")],
                                            "%u = add %x 0.0\n%v = add %x -0.0",
                                            ("f32", "[]"), "%v"), [-0.0], 0.0),
    # the gradient's share `mul 1.0 %x` (twice, for x * x) is not the program's %k, so the
    # second gradient does not reach %k: zeros, where the spec gives 1.0 + 1.0
    "gradient-nodes-apart": (program([("x", "f32", "[]")],
                                     "%k = mul 1.0 %x\n%l = mul %x %x\n%g = gradient %l %x\n"
                                     "%h = gradient %g %k", ("f32", "[]"), "%h"), [3.0], 0.0),
    # `where true %x 0.0` is %x itself: the gradient against it counts x's other use too
    "where-literal-folded": (program([("x", "f32", "[]")],
                                     "%u = where true %x 0.0\n%p = mul %u 3.0\n"
                                     "%q = mul %x 5.0\n%l = add %p %q\n%g = gradient %l %u",
                                     ("f32", "[]"), "%g"), [0.5], 8.0),
    # the two reduces are two nodes: the gradient against the first does not count the second
    "attributes-in-written-order": (program([("x", "f32", "[2]")],
                                            "%r = reduce %x op=add axis=[0]\n"
                                            "%q = reduce %x axis=[0] op=add\n"
                                            "%p = mul %r 3.0\n%s = mul %q 5.0\n"
                                            "%t = add %p %s\n%l = reduce %t op=add\n"
                                            "%g = gradient %l %r", ("f32", "[1]"), "%g"),
                                    [[0.5, 0.25]], [3.0]),
}


@pytest.mark.parametrize("name", sorted(HASH_CONSING))
def test_hash_consing_does_what_its_sentence_says(name):
    source, values, want = HASH_CONSING[name]
    shows(name, source, values, want)


def test_signed_zero_literals_merge_into_the_first_written_either_way():
    source = program([("x", "f32", "[]")], "%v = add %x -0.0\n%u = add %x 0.0",
                     ("f32", "[]"), "%u")
    shows("signed-zero-literals-merged", source, [-0.0], -0.0)


# --- tapes (SPEC.md, "Tapes") ---------------------------------------------------------------



# Entry 0 (an input, 1.0) is used by entries 5 to 8 (mul by the constants 1 to 4), whose sum
# is the last entry: its shares arrive from 8, 7, 6, 5 (decreasing order of the sender,
# SPEC.md, "Tapes"), each g * the constant, g being 1.0.
SHARES = [2.0, 1e8, -1e8, 1.0]  # what entries 5, 6, 7, 8 pass to entry 0
FAN = [["input", 1.0], *(["const", c] for c in SHARES), *(["mul", 0, k] for k in (1, 2, 3, 4)),
       ["add", 5, 6], ["add", 9, 7], ["add", 10, 8]]
B, C, D = 1.0276000499725342, 1.753499984741211, 1.538100004196167  # f32 values


def _right_fold(values):
    total = F32(values[-1])
    for value in reversed(values[:-1]):
        total = F32(F32(value) + total)
    return total


# A depth-first post-order from entry 8 = add(7, 4), operand i first, 7 = add(6, 5), 6, 5
# and 4 the products x * 1.0, x * -1e8 and x * 1e8: it finishes 0, 3, 6, 2, 5, 7, 1, 4, 8;
# reversed, 4 is processed before 5 and 5 before 6, so x's shares arrive 1e8, -1e8, 1.0,
# where the spec's order (8 to 0) sends 6's first: 1.0, -1e8, 1e8.
DEEP = [["input", 1.0], ["const", 1e8], ["const", -1e8], ["const", 1.0], ["mul", 0, 1],
        ["mul", 0, 2], ["mul", 0, 3], ["add", 6, 5], ["add", 7, 4]]
# Kahn's queue on FAN: 11; then 10 and 8 (its operands, no other user); 10 adds 9 and 7;
# 8 sends x SHARES[3]; 9 adds 5 and 6; 7 sends SHARES[2]; 5 SHARES[0]; 6 SHARES[1].
KAHN = [SHARES[3], SHARES[2], SHARES[0], SHARES[1]]
# Eight shares to x, arriving from the last product to the first (a chain of adds).
EIGHT = [1e8, 1.0, 1.0, 1.0, -1e8, 1.0, 1.0, 1.0]  # in arrival order
CHAIN = [["input", 1.0], *(["const", c] for c in EIGHT[::-1]),
         *(["mul", 0, k] for k in range(1, 9)), ["add", 9, 10],
         *(["add", 17 + k, 11 + k] for k in range(6))]


def _numpy_sum(values):
    return np.sum(np.array(values, F32), dtype=F32)


TAPES = {  # variant: (tape, entry, its derivative by the sentence)
    "tape-program-order": (FAN, 0, fold(SHARES)),  # by sender: 1, 2, 3, 4
    "tape-right-fold": (FAN, 0, _right_fold(SHARES[::-1])),  # arrival 4, 3, 2, 1
    "tape-const-zero": ([["input", 2.0], ["const", 3.0], ["mul", 0, 1]], 1, 0.0),
    # one share g * a = 3.0 to entry 0, where the spec passes two (6.0)
    "tape-same-operand-once": ([["input", 3.0], ["mul", 0, 0]], 0, 3.0),
    # d(((a * b) * c) * d)/da = (d * c) * b: in binary64, rounded to f32 once at the end
    "tape-binary64": ([["input", 1.0], ["input", B], ["input", C], ["input", D], ["mul", 0, 1],
                       ["mul", 4, 2], ["mul", 5, 3]], 0, F32((D * C) * B)),
    "tape-depth-first": (DEEP, 0, fold([1e8, -1e8, 1.0])),
    "tape-kahn": (FAN, 0, fold(KAHN)),
    "tape-blocked-past-eight": (CHAIN, 0, _numpy_sum(EIGHT)),  # numpy's own sum of eight
    # x's one share is 1.0 * -0.0; from 0.0, the sum is +0.0
    "tape-fold-from-zero": ([["input", 1.0], ["const", -0.0], ["mul", 0, 1]], 0,
                            F32(F32(0.0) + F32(-0.0))),
    # entry 2 (x + y) receives 1.0 * -0.0 and passes nothing: x receives no share, +0.0
    "tape-zero-passes-nothing": ([["input", 2.0], ["input", 5.0], ["add", 0, 1],
                                  ["const", -0.0], ["mul", 2, 3]], 0, F32(0.0)),
}


@pytest.mark.parametrize("name", sorted(TAPES))
def test_a_tape_variant_gives_the_derivative_its_sentence_says(name):
    tape, entry, want = TAPES[name]
    theirs = tapes.backprop_bits(tape, CATALOGUE[name].semantics())
    spec = tapes.backprop_bits(tape)
    want_bits = int(np.array([want], F32).view(np.uint32)[0])
    assert theirs[entry] == want_bits, (name, float(f32_of(theirs[entry])), float(want))
    assert spec[entry] != want_bits, (name, "the spec gives the same")


COVERED = {*ORDERS, "creation-order", "fold-from-zero", "not-through-detach", *HASH_CONSING,
           *TAPES}
