"""A built program: what `builder.py` makes of parsed statements, and what the interpreter,
the printer and the suite read. SPEC.md, "Text form", "Loops", "Functions"."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .gradient import Expansion
from .graph import Graph, Node
from .syntax import Statement


@dataclass(eq=False)
class Define:
    """A statement that names a value. `created`: the nodes this statement added to the graph
    (for a gradient, its whole expansion), in the order made."""

    line: int
    name: str
    node: Node
    created: list[Node]
    expansion: Expansion | None = None


@dataclass(eq=False)
class Store:
    line: int
    buffer: Node
    value: Node
    index: Node | None
    created: list[Node]


@dataclass(eq=False)
class Loop:
    line: int
    counter: Node
    name: str
    count: int
    body: list = field(default_factory=list)


@dataclass(eq=False)
class Instance:
    """A function body built for one signature of arguments."""

    graph: Graph
    params: list[Node]
    result: Node
    statements: list[Define]


@dataclass(eq=False)
class Function:
    name: str
    line: int
    params: list[str]
    body: list[Statement]  # the statements between def and end, return last
    depth: int  # how deep calls nest below it, itself included
    instances: dict[tuple, Instance] = field(default_factory=dict)


@dataclass(eq=False)
class Program:
    graph: Graph
    statements: list  # Define | Store | Loop, in program order
    buffers: dict[int, Node]  # slot -> buffer node
    functions: dict[str, Function]
    definitions: list[Statement]  # the def ... end statements as parsed, for printing
    calls: dict[Node, Instance]  # call node -> the instance it runs
    names: dict[Node, str]  # the first name given to each named node
    # The Semantics it was built by, and runs by (set by build_program, always). Not imported:
    # semantics.py imports the interpreter, which imports this module.
    semantics: Any = None


def walk(statements: list) -> Iterator:
    """Every statement of `statements` (Define, Store, Loop) in program order, the bodies of
    ranges included after their Loop; iterative, so deep nesting does not recurse."""
    stack = [iter(statements)]
    while stack:
        s = next(stack[-1], None)
        if s is None:
            stack.pop()
            continue
        yield s
        if isinstance(s, Loop):
            stack.append(iter(s.body))


def stores(program: Program) -> list[Store]:
    """Every store of the program, those in range bodies included, in program order."""
    return [s for s in walk(program.statements) if isinstance(s, Store)]


def cone(program: Program, slot: int | None) -> tuple[set, list[Store]]:
    """(the nodes the final value of `slot` depends on, the stores they reach): through
    operands, loads (every store into the loaded buffer) and calls (the instance of the
    body called). From every store when `slot` is None."""
    every = stores(program)
    into: dict = {}
    for s in every:
        into.setdefault(s.buffer, []).append(s)
    reached: list[Store] = []  # in the order reached; a Store hashes by identity
    taken: set = set()
    seen: set = set()
    nodes: list = []

    def take(found) -> None:
        for s in found:
            if s not in taken:
                taken.add(s)
                reached.append(s)
                nodes.extend(n for n in (s.value, s.index) if n is not None)

    take(every if slot is None else into.get(program.buffers.get(slot), []))
    while nodes:
        node = nodes.pop()
        if node in seen:
            continue
        seen.add(node)
        nodes.extend(node.operands)
        if node.op == "load":
            take(into.get(node.operands[0], []))
        elif node.op == "call" and node in program.calls:
            nodes.append(program.calls[node].result)
    return seen, reached


def made_by_gradient(program: Program, node) -> Define | None:
    """The gradient statement whose expansion first made `node`, if one did (SPEC.md, "Hash
    consing": a later statement may name the same node)."""
    for d in program.statements:
        if isinstance(d, Define) and d.expansion is not None and node in d.created:
            return d
    return None
