"""Printing a built program: with every gradient replaced by its nodes, and the walk's trace.

docs/commands.md, "The command line". The expanded text is itself a program: building it gives the
same values bit for bit (tests/test_printer.py checks that).
"""

from __future__ import annotations

from .graph import Node
from .program import Define, Loop, Program, Store
from .syntax import Operand, format_attr, format_program

_HIDDEN = {"value", "count", "func", "index"}  # attributes shown elsewhere, or internal


class Names:
    """One printable name for every node: the program's own names first, then `%g.1`,
    `%g.2`, ... for the nodes of the expansion of `%g = gradient ...`."""

    def __init__(self, program: Program):
        self.of: dict[Node, str] = {}
        self.taken = set(program.names.values())
        for node, name in program.names.items():
            self.of[node] = name
        self._name_expansions(program.statements)

    def _name_expansions(self, statements: list) -> None:
        for s in statements:
            if isinstance(s, Loop):
                self._name_expansions(s.body)
            elif isinstance(s, Define) and s.expansion is not None:
                k = 0
                for node in s.created:
                    if node.is_literal or node in self.of:
                        continue
                    k += 1
                    while f"{s.name}.{k}" in self.taken:
                        k += 1
                    self.of[node] = f"{s.name}.{k}"
                    self.taken.add(self.of[node])

    def text(self, node: Node) -> str:
        if node.is_literal:
            return Operand(node.dtype, "", node.attr("value")).canonical()
        return self.of.get(node, f"<{node.op} #{node.id}>")


def format_node(node: Node, names: Names) -> str:
    """`op operands attrs` of a node, as a statement's right-hand side."""
    parts = [node.op]
    if node.op == "call":
        parts.append(node.attr("func"))
    parts += [names.text(o) for o in node.operands]
    parts += [f"{k}={format_attr(v)}" for k, v in node.attrs if k not in _HIDDEN]
    return " ".join(parts)


def format_expanded(program: Program) -> str:
    """The program with each gradient statement replaced by the nodes it built."""
    names = Names(program)
    lines = format_program(program.definitions).splitlines() if program.definitions else []

    def block(statements: list, depth: int) -> None:
        pad = "  " * depth
        for s in statements:
            if isinstance(s, Loop):
                lines.append(f"{pad}{s.name} = range {s.count}")
                block(s.body, depth + 1)
                lines.append(f"{pad}end {s.name}")
            elif isinstance(s, Store):
                index = f" {names.text(s.index)}" if s.index is not None else ""
                lines.append(f"{pad}store {names.text(s.buffer)} {names.text(s.value)}{index}")
            elif s.expansion is not None:
                lines.append(f"{pad}# {s.name} = gradient {names.text(s.expansion.y)} "
                             f"{names.text(s.expansion.x)}")
                for node in s.created:
                    if not node.is_literal:
                        lines.append(f"{pad}{names.text(node)} = {format_node(node, names)}")
                if s.node not in s.created or s.node.is_literal:
                    lines.append(f"{pad}# {s.name} is {names.text(s.node)}")
            elif s.node in s.created:
                if s.node.op == "buffer":
                    shape = format_attr(s.node.shape)
                    lines.append(f"{pad}{s.name} = buffer slot={s.node.attr('slot')} "
                                 f"dtype={s.node.dtype} shape={shape}")
                else:
                    lines.append(f"{pad}{s.name} = {format_node(s.node, names)}")
            else:
                lines.append(f"{pad}# {s.name} is {names.text(s.node)} (the same node)")

    block(program.statements, 0)
    return "\n".join(lines) + "\n"


def format_trace(program: Program) -> str:
    """Every gradient's walk: each visited node, the shares it received in arrival order,
    their left fold, and what it passed to which operand."""
    names = Names(program)
    lines = []

    def block(statements: list) -> None:
        for s in statements:
            if isinstance(s, Loop):
                block(s.body)
            elif isinstance(s, Define) and s.expansion is not None:
                e = s.expansion
                lines.append(f"{s.name} = gradient {names.text(e.y)} {names.text(e.x)} "
                             f"(line {s.line}): result {names.text(e.result)}")
                if not e.visits:
                    lines.append("  the loss does not depend on x: zeros")
                for visit in e.visits:
                    shares = ", ".join(names.text(n) for n in visit.shares)
                    node = names.text(visit.node)
                    fold = names.text(visit.gradient) if visit.gradient is not None else "-"
                    lines.append(f"  {node} = {format_node(visit.node, names)}")
                    lines.append(f"    received [{shares}] -> gradient {fold}")
                    if visit.node is e.x:
                        lines.append("    is x: the result")
                    for k, share in visit.passed:
                        operand = names.text(visit.node.operands[k])
                        lines.append(f"    passes {names.text(share)} to operand {k + 1} "
                                     f"({operand})")

    block(program.statements)
    return "\n".join(lines) + ("\n" if lines else "")
