"""SPEC.md's tables, cell by cell, against the data they state: "Operations" against
reference/ops.py (each op in one row; an elementwise op's operand dtypes and result; the
attributes each op takes) and "The rules" against reference/rules.py (a row a rule, and each
share's op form as the rule builds it, rendered by a symbolic emitter in the table's own
notation). A table edited by hand, or a rule changed in the code alone, fails here."""

from __future__ import annotations

import re

import pytest

from gradient_conformance.reference.ops import OPS, REDUCE_OPS
from gradient_conformance.reference.rules import RULES
from tests.conftest import ROOT

SPEC = (ROOT / "SPEC.md").read_text()


def table(section: str) -> list[list[str]]:
    """The rows of the first table of SPEC.md's `section` (its header left out), each a list
    of its cells. A `\\|` inside a cell is a bar of the cell's text."""
    body = SPEC.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("|")]
    rows = [[cell.strip().replace("\\|", "|") for cell in
             re.split(r"(?<!\\)\|", line.strip().strip("|"))] for line in lines]
    return rows[2:]  # after the header and its rule


def code(cell: str) -> list[str]:
    """The `code` spans of a cell, in order."""
    return re.findall(r"`([^`]+)`", cell)


OPERATIONS = table("Operations")
NOT_OPS = {"call", "gradient"}  # rows of statements with a value that are not ops.py's rows


def _row_ops(row: list[str]) -> list[str]:
    return [span.split()[0] for span in code(row[0])]


def test_each_op_stands_in_one_row_of_operations():
    named = [op for row in OPERATIONS for op in _row_ops(row)]
    assert sorted(named) == sorted(set(named)), named  # none twice
    assert set(named) == set(OPS) | NOT_OPS


@pytest.mark.parametrize("row", OPERATIONS, ids=lambda row: " ".join(_row_ops(row)))
def test_an_operations_row_states_its_ops_dtypes_result_and_attributes(row):
    """An elementwise op's row names exactly the dtypes it takes, and its result ("same"
    where the op gives its operands' dtype); every row names exactly the attributes of its
    ops (`name=` in the op's form), and reduce's op= the table's REDUCE_OPS."""
    first, operands, result = row[0], row[1], row[2]
    for name in _row_ops(row):
        if name in NOT_OPS:
            continue
        op = OPS[name]
        forms = [span for span in code(first) if span.split()[0] == name]
        attributes = {a for form in forms for a in re.findall(r"\[?(\w+)=", form)}
        assert attributes == set(op.attributes), (name, attributes, op.attributes)
        if op.elementwise:
            said = set(re.findall(r"\b(f32|i32|bool)\b", operands))
            assert said == set(op.dtypes), (name, said, op.dtypes)
            # "same" (the operands' dtype), or that dtype itself where it is the only one
            alike = {"same", *op.dtypes} if len(op.dtypes) == 1 else {"same"}
            assert result in ({op.result} if op.result else alike), (name, result, op.result)
    if "reduce" in _row_ops(row):
        values = re.search(r"op=([\w|]+)", first).group(1).split("|")
        assert tuple(values) == REDUCE_OPS, values


# --- the rules ---------------------------------------------------------------------------


class Marker:
    """A value the table writes as a word (`S`, `[same axis]`)."""

    def __init__(self, text: str):
        self.text = text


class Symbol:
    """A node as the table names it: u, g, a, b, c; `shape` and `axis` as the table writes
    them for a node of any shape."""

    def __init__(self, name: str, operands: tuple[Symbol, ...] = (), shape=None):
        self.name, self.operands = name, operands
        self.shape = shape if shape is not None else Marker("S")

    def attr(self, key: str):
        return Marker("[same axis]") if key == "axis" else None


class Emitter:
    """The rules' emitter (reference/gradient.py's), building text in the table's notation:
    an op and its operands, a nested operand in parentheses, a literal as written."""

    def __call__(self, op: str, /, *operands, **attrs) -> Symbol:
        words = [op, *(o.name if " " not in o.name else f"({o.name})" for o in operands)]
        for key, value in attrs.items():
            if isinstance(value, Marker) and value.text.startswith("["):
                words.append(value.text)  # the table writes the axes it keeps in words
            elif value is not None:
                words.append(f"{key}={value.text if isinstance(value, Marker) else value}")
        return Symbol(" ".join(words))

    @staticmethod
    def f32(text: str) -> Symbol:
        return Symbol(text)


def _share(key: str, k: int, arity: int) -> str:
    """The share rule `key` passes to operand k, as text ("nothing" for None)."""
    names = {1: ("a",), 2: ("a", "b"), 3: ("c", "a", "b")}[arity]
    u = Symbol("u", tuple(Symbol(n) for n in names))
    share = RULES[key](Emitter(), u, Symbol("g"), k)
    return "nothing" if share is None else share.name


RULES_TABLE = table("The rules")


def _row_keys(row: list[str]) -> list[str]:
    """The rows of RULES a row of the table states: its ops, and reduce's op=."""
    keys = []
    for span in code(row[0]):
        name = span.split()[0]
        found = re.search(r"op=(\w+)", span)
        keys.append(f"{name}.{found.group(1)}" if name == "reduce" and found else name)
    return keys


def test_each_rule_stands_in_one_row_of_the_rules():
    keys = [key for row in RULES_TABLE for key in _row_keys(row)]
    assert sorted(keys) == sorted(set(keys)) and set(keys) == set(RULES), keys
    assert set(RULES) == {key for op in OPS.values() for key in op.rules}


@pytest.mark.parametrize("row", RULES_TABLE, ids=lambda row: " ".join(_row_keys(row)))
def test_a_rules_row_is_the_share_the_rule_builds(row):
    """Each share the row writes is, to the letter, the one its rule builds: per operand
    ("a: `...`; b: `...`") or one for a unary op. reduce op=max writes its mask as m (defined
    in the cell), and expand its two cases in words: each is rendered so."""
    cell = row[1]
    for key in _row_keys(row):
        arity = OPS[key.split(".")[0]].arity
        arity = arity if isinstance(arity, int) else 1
        if key == "expand":
            scalar = RULES[key](Emitter(), Symbol("u", (Symbol("a", shape=()),)),
                                Symbol("g"), 0)
            assert code(cell)[0] == scalar.name, (cell, scalar.name)
            shaped = RULES[key](Emitter(), Symbol("u", (Symbol("a", shape=(3, 1, 2, 1)),)),
                                Symbol("g"), 0)
            assert shaped.name == "reduce g op=add axis=(1, 3)", shaped.name
            assert "every dim where a has size 1" in cell
            continue
        if key == "where":  # c receives nothing: the cell says so in words
            written = dict(part.split(": ", 1) for part in cell.split("; "))
            assert written["c"] == "nothing"
            assert [code(written[n])[0] for n in ("a", "b")] == \
                [_share(key, k, 3) for k in (1, 2)], cell
            continue
        shares = [_share(key, k, arity) for k in range(arity)]
        if key == "detach":
            assert cell == "nothing" and shares == ["nothing"], (cell, shares)
            continue
        if key == "reduce.max":
            m = Emitter()("where", Emitter()("cmpne", Symbol("a"),
                                             Emitter()("expand", Symbol("u"),
                                                       shape=Marker("S"))),
                          Symbol("0.0"), Symbol("1.0")).name
            assert code(cell)[1] == f"m = {m}", (cell, m)
            shares = [s.replace(f"({m})", "m") for s in shares]
        if key == "reshape":  # the cell writes the shape in words: "shape=` a's shape"
            assert cell.endswith("a's shape"), cell
            shares = [s.removesuffix("S") for s in shares]
        if arity == 2:
            written = [code(part)[0] for part in cell.split("; ")]
            assert [part.split(":")[0] for part in cell.split("; ")] == ["a", "b"], cell
        else:
            written = code(cell)[:1]
        assert written == shares, (key, written, shares)
