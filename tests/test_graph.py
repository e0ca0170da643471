"""The hash-consed graph: which nodes are one node (SPEC.md, "Hash consing"), iterative walks
on long chains, and no state shared between builds."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from gradient_conformance import reference
from gradient_conformance.reference import exact
from gradient_conformance.reference.errors import BuildError
from gradient_conformance.reference.gradient import post_order
from gradient_conformance.reference.graph import Graph


def _program(body: str, shape: str = "[]"):
    head = (f"%in = buffer slot=0 dtype=f32 shape={shape}\n"
            f"%buf = buffer slot=1 dtype=f32 shape={shape}\n")
    program = reference.compile_program(head + body)
    named = {}
    for node, name in program.names.items():
        named[name] = node
    return program, named


def _node_of(program, name):
    from gradient_conformance.reference.program import Define, Loop

    def find(statements):
        for s in statements:
            if isinstance(s, Define) and s.name == name:
                return s.node
            if isinstance(s, Loop):
                if s.name == name:
                    return s.counter
                found = find(s.body)
                if found is not None:
                    return found
        return None
    return find(program.statements)


def test_equal_literals_are_one_node_and_signed_zeros_are_two():
    program, _ = _program("%x = load %in\n%a = add %x 2.0\n%b = mul %x 2.0\n"
                          "%c = add %x 0.0\n%d = add %x -0.0\n")
    a, b = _node_of(program, "%a"), _node_of(program, "%b")
    assert a.operands[1] is b.operands[1]
    c, d = _node_of(program, "%c"), _node_of(program, "%d")
    assert c is not d and c.operands[1] is not d.operands[1]
    literals = [n for n in program.graph.nodes if n.is_literal]
    bits = sorted(n.attr("value") for n in literals)
    assert bits == sorted({exact.f32_from_text(t) for t in ("2.0", "0.0", "-0.0")})


def test_equal_expressions_are_one_node_whatever_the_attribute_order():
    program, _ = _program("%x = load %in\n%a = reduce %x op=add axis=[0]\n"
                          "%b = reduce %x axis=[0] op=add\n%c = reduce %x op=add axis=0\n", "[2]")
    assert _node_of(program, "%a") is _node_of(program, "%b") is _node_of(program, "%c")


def test_loads_merge_only_between_stores_to_their_buffer():
    program, _ = _program("%a = load %in\n%b = load %in\nstore %buf 1.0\n%c = load %in\n"
                          "store %in 2.0\n%d = load %in\n")
    a, b, c, d = (_node_of(program, n) for n in ("%a", "%b", "%c", "%d"))
    assert a is b is c  # the store to %buf does not separate loads of %in
    assert d is not a  # the store to %in does


def test_only_a_load_in_a_range_body_is_kept_apart_from_one_outside():
    """ir.md, "Hash consing": a load inside a body is never merged with one outside it; any
    other node made inside a body is the equal one outside (`mul %x 2.0` with %x from
    outside), and what depends on the body's load stays the body's."""
    program, _ = _program("%x = load %in\n%a = mul %x 2.0\n%i = range 2\n  %y = load %in\n"
                          "  %b = mul %x 2.0\n  %c = mul %x 2.0\n  %d = mul %y 2.0\nend %i\n")
    a, b, c, d = (_node_of(program, n) for n in ("%a", "%b", "%c", "%d"))
    assert a is b is c and d is not a and a.scope == 0 and d.scope != 0
    assert _node_of(program, "%y") is not _node_of(program, "%x")


def test_two_ranges_are_two_counters():
    program, _ = _program("%i = range 2\nend %i\n%j = range 2\nend %j\n")
    assert _node_of(program, "%i") is not _node_of(program, "%j")


def test_graphs_share_nothing():
    """Two builds of one text give equal keys and no common node: no global cache."""
    text = "%x = load %in\n%y = mul %x %x\n%g = gradient %y %x\nstore %buf %g\n"
    first, _ = _program(text)
    other, _ = _program("%z = load %in\n%w = sin %z\n")
    again, _ = _program(text)
    assert first.graph.keys() == again.graph.keys()
    assert not {id(n) for n in first.graph.nodes} & {id(n) for n in again.graph.nodes}
    assert first.graph.keys() != other.graph.keys()


def test_graph_node_interns():
    graph = Graph()
    one = graph.const("f32", exact.ONE)
    assert graph.node("add", (one, one)) is graph.node("add", (one, one))
    # Made in a body, a node of outside values is the one outside (reference/graph.py,
    # hoisted_scope); a load is kept in its body.
    assert graph.node("add", (one, one), scope=1) is graph.node("add", (one, one))
    assert len(graph.nodes) == 2


CHAIN = 20_000  # twenty times the default recursion limit: a recursive walk fails


def test_a_long_chain_builds_expands_and_runs_without_recursion():
    """A 2*10^4-node chain: parse, build, expand its gradient and run, under the default
    recursion limit. y = x * w^n with w = 1, so y = x and dy/dx = 1."""
    assert sys.getrecursionlimit() < CHAIN
    lines = ["%in = buffer slot=0 dtype=f32 shape=[]", "%out = buffer slot=1 dtype=f32 shape=[2]",
             "%win = buffer slot=2 dtype=f32 shape=[]", "%v0 = load %in", "%w = load %win"]
    lines += [f"%v{k} = mul %v{k - 1} %w" for k in range(1, CHAIN)]
    lines += [f"%g = gradient %v{CHAIN - 1} %v0", f"store %out %v{CHAIN - 1} 0",
              "store %out %g 1"]
    run = reference.build("\n".join(lines))
    out = run({0: np.float32(3.0).reshape(()), 1: np.zeros(2, np.float32),
               2: np.float32(1.0).reshape(())})
    assert out[1].tolist() == [3.0, 1.0]
    gradient = next(n for n, name in run.program.names.items() if name == "%g")
    assert len(post_order(gradient)) > CHAIN  # the shares form a chain as long as the loss


def test_nesting_past_the_limit_is_an_error_not_a_crash():
    text = "\n".join(f"%i{k} = range 1" for k in range(100))
    with pytest.raises(BuildError, match="nest deeper"):
        reference.build(text)
