"""The reference, for a system without an f32 max: it declares `max:f32` unsupported (an op at
a dtype, CAPABILITIES) and refuses any program that has one. Every check must leave such
programs out, the fixed ones (a forward error per op, a reduce over every axis set, a rule
over every axis set) as the drawn ones and the case files."""

from gradient_conformance import reference
from gradient_conformance.reference.ops import typed_features

NAME = "no f32 max"
CAPABILITIES = {"unsupported": ["max:f32"]}


def build(source):
    runner = reference.build(source)
    program = runner.program
    graphs = [program.graph, *(i.graph for i in program.calls.values())]
    if "max:f32" in typed_features(n for g in graphs for n in g.nodes):
        raise ValueError("this system has no max of f32 values")
    return runner
