"""The text form: a lexer, a parser to a flat list of statements, and the canonical printer.

SPEC.md, "Text form". The parser knows the grammar only; which ops exist and what they accept
is the builder's business (build.py), so that one table of ops serves both.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import cast

from . import exact
from .errors import LineBeyondLimit, ParseError

NAME = re.compile(r"%[A-Za-z_][A-Za-z0-9_.]*")
FUNC = re.compile(r"@[A-Za-z_][A-Za-z0-9_]*")
_WORD = r"[A-Za-z0-9_.+\-]+"
_TOKEN = re.compile(rf"\s*(?:({NAME.pattern})|({FUNC.pattern})|([=\[\],])|({_WORD}))")
_OPNAME = re.compile(r"[a-z][a-z0-9_]*")
_KEY = re.compile(r"[a-z][a-z0-9_]*")
_INTEGER = re.compile(r"-?\d+")
# The reference's limit on one line (SPEC.md, "Limits"): a line of 10^6 tokens is an error,
# not minutes of parsing.
MAX_LINE_TOKENS = 10_000


@dataclass(frozen=True)
class Operand:
    """An operand as written: a %name, an @function, or a literal with its decoded value
    (f32: the bits; i32: the int; bool: the bool)."""

    kind: str  # "name" | "func" | "f32" | "i32" | "bool"
    text: str
    value: object = None

    def canonical(self) -> str:
        if self.kind == "f32":
            return exact.f32_to_text(cast(int, self.value))  # an f32 literal's value: bits
        if self.kind == "bool":
            return "true" if self.value else "false"
        if self.kind == "i32":
            return str(self.value)
        return self.text


@dataclass(frozen=True)
class Statement:
    """One line of a program. `op` is the op name, or `def`, `end`, `return`."""

    line: int
    target: str | None
    op: str
    operands: tuple[Operand, ...]
    attrs: tuple[tuple[str, object], ...]  # values: int, str, or tuple of ints

    def attr(self, key: str, default=None):
        return dict(self.attrs).get(key, default)


def parse(text: str) -> list[Statement]:
    """Parse a whole program into statements, in order. Raises ParseError."""
    statements = []
    for number, raw in enumerate(text.splitlines(), start=1):
        code = raw.split("#", 1)[0]
        if code.strip():
            statements.append(_statement(number, code))
    return statements


def _statement(line: int, code: str) -> Statement:
    """The statement on a line: its parse without the line number, remembered, numbered.
    Programs repeat their lines (buffers, loads, the generators' names), and a statement is
    frozen and depends on its text alone, so no state passes between parses. A long line is
    not remembered, nor one that does not parse: it is parsed again for its error, which
    names the line."""
    code = code.strip()
    parsed = _parsed(code) if len(code) <= MAX_REMEMBERED else None
    if parsed is None:
        return _parse_line(line, code)
    return Statement(line, *parsed)


MAX_REMEMBERED = 200  # characters of a line whose parse is remembered


@functools.lru_cache(maxsize=8192)
def _parsed(code: str) -> tuple | None:
    try:
        s = _parse_line(0, code)
    except ParseError:
        return None
    return s.target, s.op, s.operands, s.attrs


def literal(text: str, line: int = 0) -> Operand:
    """Decode a literal token (SPEC.md, "Text form"), or raise ParseError."""
    decoded = _decoded(text)
    if isinstance(decoded, str):
        raise ParseError(line, text, decoded)
    return decoded


@functools.lru_cache(maxsize=4096)
def _decoded(text: str) -> Operand | str:
    """A literal token's operand, or what is wrong with it. Remembered: a program repeats
    its few literals, and reading a decimal exactly is the dearest step of a parse. The
    operand is frozen and depends on the text alone, so no state passes between parses."""
    if text in ("true", "false"):
        return Operand("bool", text, text == "true")
    if _INTEGER.fullmatch(text):
        try:
            return Operand("i32", text, exact.i32_from_text(text))
        except OverflowError:
            return ("i32 literal out of range: it must lie in [-2147483648, 2147483647]; "
                    "write it with a '.' for an f32")
    try:
        return Operand("f32", text, exact.f32_from_text(text))
    except ValueError:
        return "expected an operand: a %name or a literal (2.0, -1e-3, inf, nan, 7, true)"


def _lex(line: int, code: str) -> list[str]:
    tokens, pos = [], 0
    for match in _TOKEN.finditer(code):
        if match.start() != pos:  # a gap: something no token starts with
            break
        tokens.append(match.group(cast(int, match.lastindex)))  # every token is a group
        if len(tokens) > MAX_LINE_TOKENS:
            raise LineBeyondLimit(line, tokens[-1],
                                  f"more than {MAX_LINE_TOKENS} tokens on one line")
        pos = match.end()
    if code[pos:].strip():
        bad = code[pos:].strip()[:1]
        raise ParseError(line, bad, "unexpected character; expected a %name, an @function, "
                         "an op, a literal or key=value")
    return tokens


def _parse_line(line: int, code: str) -> Statement:
    tokens = _lex(line, code)
    pos = 0
    target = None
    if len(tokens) >= 2 and tokens[1] == "=" and NAME.fullmatch(tokens[0]):
        target, pos = tokens[0], 2
    if pos >= len(tokens):
        raise ParseError(line, tokens[-1], "expected an op name after '='")
    op = tokens[pos]
    if not _OPNAME.fullmatch(op):
        raise ParseError(line, op, "expected an op name (add, load, range, ...)"
                         + ("; a statement's target comes before '='" if op == "=" else ""))
    pos += 1
    operands: list[Operand] = []
    attrs: dict[str, object] = {}
    while pos < len(tokens):
        token = tokens[pos]
        if pos + 1 < len(tokens) and tokens[pos + 1] == "=":
            if not _KEY.fullmatch(token):
                raise ParseError(line, token, "expected an attribute key (a lowercase word)")
            if token in attrs:
                raise ParseError(line, token, f"attribute '{token}' given twice")
            value, pos = _attr_value(line, tokens, pos + 2)
            attrs[token] = value
            continue
        if attrs:
            raise ParseError(line, token, "expected key=value: operands come before attributes")
        if token in "=[],":
            raise ParseError(line, token, "expected an operand: a %name, an @function or a literal")
        if NAME.fullmatch(token):
            operands.append(Operand("name", token))
        elif FUNC.fullmatch(token):
            operands.append(Operand("func", token))
        else:
            operands.append(literal(token, line))
        pos += 1
    return Statement(line, target, op, tuple(operands), tuple(attrs.items()))


def _attr_value(line: int, tokens: list[str], pos: int) -> tuple[object, int]:
    if pos >= len(tokens):
        raise ParseError(line, tokens[-1], "expected a value after '=' (an integer, a dtype, "
                         "an identifier or [int, ...])")
    token = tokens[pos]
    if token == "[":
        items: list[int] = []
        pos += 1
        while True:
            if pos >= len(tokens):
                raise ParseError(line, tokens[-1], "expected ']' to close the list")
            if tokens[pos] == "]" and (not items or tokens[pos - 1] != ","):
                return tuple(items), pos + 1
            if items:
                if tokens[pos] != ",":
                    raise ParseError(line, tokens[pos], "expected ',' or ']' in the list")
                pos += 1
                if pos >= len(tokens):
                    raise ParseError(line, tokens[-1], "expected an integer after ','")
            items.append(_list_int(line, tokens[pos]))
            pos += 1
    if _INTEGER.fullmatch(token):
        return _list_int(line, token), pos + 1
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token):
        return token, pos + 1
    raise ParseError(line, token, "expected an attribute value: an integer, a dtype, an "
                     "identifier or [int, ...]")


def _list_int(line: int, token: str) -> int:
    if not _INTEGER.fullmatch(token):
        raise ParseError(line, token, "expected an integer")
    if len(token.lstrip("-").lstrip("0")) > 10:
        raise ParseError(line, token, "integer too large: at most 2147483647")
    return int(token)


# --- printing -----------------------------------------------------------------------------


def format_statement(statement: Statement, operand_text=None) -> str:
    """One statement in canonical form. `operand_text` may rename operands when printing an
    expanded program."""
    render = operand_text or Operand.canonical
    parts = [statement.op, *(render(o) for o in statement.operands)]
    parts += [f"{k}={format_attr(v)}" for k, v in statement.attrs]
    text = " ".join(parts)
    return f"{statement.target} = {text}" if statement.target else text


def format_attr(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def format_program(statements: list[Statement]) -> str:
    """The canonical text of a parsed program: one statement a line, bodies indented."""
    lines, depth = [], 0
    for statement in statements:
        if statement.op == "end":
            depth = max(depth - 1, 0)
        lines.append("  " * depth + format_statement(statement))
        if statement.op in ("range", "def"):
            depth += 1
    return "\n".join(lines) + "\n"
