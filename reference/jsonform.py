"""A program as JSON, parsed and structure-checked by the reference, for an implementation
in any language that would rather not read the IR's text. SPEC.md, "The protocol" (the
program as JSON).

    {"buffers": [{"name": "%a", "slot": 0, "dtype": "f32", "shape": [2, 3]}, ...],
     "functions": [{"name": "@f", "line": 4, "params": ["%p", "%q"], "body": [...]}],
     "body": [statement, ...]}

A statement is `{"line", "op", "target"?, "operands", "attrs", "dtype"?, "shape"?}`, and a
range also has `"count"` and `"body"`. `dtype` and `shape` are its value's, where it has one
(in a function body, where every call gives it the same). An operand is one of
`{"name": "%x", "line": N}` (the line that defined the value it names, in its scope),
`{"buffer": "%a"}` (a load's or store's buffer, or a buffer a `gradient` names as its loss
or x), `{"function": "@f"}`, or `{"literal": BITS, "dtype": D}`, its bits as the protocol
carries buffers' (the f32 rounded by the reference, ties to even). A program the
reference's structure check refuses is `{"error": "line N: ..."}`; a `gradient` is checked
with its loss and x read as values and nothing decided of it (builder.gradients_stood_in),
since whether one is accepted is the implementation's to say.
"""

from __future__ import annotations

from typing import cast

from .builder import build_program, gradients_stood_in
from .errors import IRError
from .program import Define, walk
from .syntax import Operand, Statement, parse


def program_json(source: str) -> dict:
    """The program in `source` as JSON (the module docstring), or {"error": ...}."""
    try:
        statements = parse(source)
        program = build_program(gradients_stood_in(statements))
    except IRError as problem:
        return {"error": str(problem)}
    types: dict[int, set] = {}
    defines = [s for s in walk(program.statements) if isinstance(s, Define)]
    defines += [d for i in program.calls.values() for d in i.statements]
    for d in defines:
        if " " not in d.name:  # a stand-in's helper (gradients_stood_in) is no statement
            types.setdefault(d.line, set()).add((d.node.dtype, d.node.shape))
    return _Writer(types).program(statements)


def _bits(operand: Operand) -> int:
    if operand.kind == "bool":
        return int(bool(operand.value))
    return cast(int, operand.value) & 0xFFFFFFFF  # f32: already its bits; i32: two's complement


class _Writer:
    def __init__(self, types: dict[int, set]):
        self.types = types
        self.functions: list[dict] = []
        self.buffers: list[dict] = []

    def program(self, statements: list[Statement]) -> dict:
        body, _ = self.block(statements, 0, [{}])
        return {"buffers": self.buffers, "functions": self.functions, "body": body}

    def block(self, statements: list[Statement], k: int, scopes: list[dict]) \
            -> tuple[list[dict], int]:
        """The statements from k to the end of their block, and where the block ends. A scope
        is a dict name -> the line that defined it; inner scopes last."""
        out: list[dict] = []
        while k < len(statements):
            s = statements[k]
            k += 1
            if s.op == "end":
                break
            if s.op == "def":
                params = [o.text for o in s.operands[1:]]
                body, k = self.block(statements, k, [scopes[0], dict.fromkeys(params, s.line)])
                self.functions.append({"name": s.operands[0].text, "line": s.line,
                                       "params": params, "body": body})
                continue
            if s.op == "buffer":
                self.buffers.append({"name": s.target, "slot": s.attr("slot"),
                                     "dtype": s.attr("dtype"),
                                     "shape": _shape(s.attr("shape", ()))})
                scopes[-1][s.target] = s.line
                continue
            entry = {"line": s.line, "op": s.op, "operands": [
                self.operand(s, o, n, scopes) for n, o in enumerate(s.operands)],
                "attrs": {key: list(v) if isinstance(v, tuple) else v for key, v in s.attrs}}
            if s.op == "range":
                entry["count"] = cast(int, s.operands[0].value)
                entry["target"] = s.target
                entry["body"], k = self.block(statements, k, [*scopes, {s.target: s.line}])
            else:
                if s.target:
                    entry["target"] = s.target
                known = self.types.get(s.line, set())
                if len(known) == 1:
                    dtype, shape = next(iter(known))
                    entry["dtype"], entry["shape"] = dtype, list(shape)
                if s.target:
                    scopes[-1][s.target] = s.line
            out.append(entry)
        return out, k

    def operand(self, s: Statement, o: Operand, n: int, scopes: list[dict]) -> dict:
        if o.kind == "func":
            return {"function": o.text}
        if o.kind != "name":
            return {"literal": _bits(o), "dtype": o.kind}
        if n == 0 and s.op in ("load", "store"):
            return {"buffer": o.text}
        if s.op == "gradient" and not any(o.text in scope for scope in scopes[1:]) and \
                any(b["name"] == o.text for b in self.buffers):
            return {"buffer": o.text}  # a buffer as the loss or x: the system says what then
        line = next((scope[o.text] for scope in reversed(scopes) if o.text in scope), 0)
        return {"name": o.text, "line": line}


def _shape(shape) -> list[int]:
    return [shape] if isinstance(shape, int) else list(shape)
