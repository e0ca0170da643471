"""`gradient-conformance checks`: the suite's checks, a line each, to pick from with `-k`.
docs/suite.md, "The conformance suite".

Read from the checks' source (their names and the first line of their docstrings), not by
importing them, so that it answers at once and says nothing the checks do not say.
"""

from __future__ import annotations

import ast
import pathlib
import re

CHECKS = pathlib.Path(__file__).resolve().parent.parent / "checks"
_SPEC = re.compile(r'SPEC\.md,\s+"([^"]+)"')
_DOCS = re.compile(r'docs/\w+\.md,\s+"([^"]+)"')


def _checks():
    """(file, check, its docstring, its module's docstring) for every check, in file order,
    read from the source."""
    for path in sorted(CHECKS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ast.get_docstring(tree) or ""
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                yield path.name, node.name, ast.get_docstring(node) or "", module


def listed() -> list[tuple[str, str, str]]:
    """(file, check, what it checks) for every check, in file order: the first sentence of
    its docstring, or of its module's where it has none."""
    return [(file, name, _sentence(own) or _sentence(module))
            for file, name, own, module in _checks()]


def areas() -> dict[str, str]:
    """check -> its area (docs/grading.md, "The rubric"), read from the installed checks'
    source (not imported): the first SPEC.md section its docstring names, else its module
    docstring's, else the first docs/ section either names."""
    found = {}
    for file, name, own, module in _checks():
        own, module = " ".join(own.split()), " ".join(module.split())
        named = (_SPEC.search(own) or _SPEC.search(module) or _DOCS.search(own) or
                 _DOCS.search(module))
        if named is None:
            raise ValueError(f"{file}::{name} cites no section (of the spec, or of docs/): "
                             "its area is unknown")
        found[name] = named.group(1)
    return found


def _sentence(doc: str) -> str:
    """The first sentence of a docstring, on one line."""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    end = next((k + 1 for k, c in enumerate(text) if c == "." and
                (k + 1 == len(text) or text[k + 1] == " ")), len(text))
    return text[:end].rstrip(".") + "." if text else ""


def add_parser(commands) -> None:
    commands.add_parser("checks", help="list the suite's checks, a line each (pick with -k)")


def run(args) -> int:
    rows = listed()
    if not rows:
        raise ValueError(f"no checks found in {CHECKS}: the package is incomplete")
    width = max(len(name) for _, name, _ in rows)
    for file, name, says in rows:
        print(f"{name:<{width}}  {says or '(' + file + ')'}")
    print(f"\n{len(rows)} checks; run some with -k: gradient-conformance --impl=X -k "
          f"{rows[0][1].removeprefix('test_')}")
    return 0
