"""The area of the rubric each test of the suite counts in (docs/grading.md, "The rubric"),
and the checks as their source says them: read from the installed checks' source, not
imported, so that `gradient-conformance checks` and `grade` answer at once, importing
neither the checks nor pytest nor Hypothesis.
"""

from __future__ import annotations

import ast
import pathlib
import re

CHECKS = pathlib.Path(__file__).resolve().parent / "checks"
_SPEC = re.compile(r'SPEC\.md,\s+"([^"]+)"')
_DOCS = re.compile(r'docs/\w+\.md,\s+"([^"]+)"')


def checks_in_source():
    """(file, check, its docstring, its module's docstring) for every check, in file order,
    read from the source."""
    for path in sorted(CHECKS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ast.get_docstring(tree) or ""
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                yield path.name, node.name, ast.get_docstring(node) or "", module


def areas() -> dict[str, str]:
    """check -> its area (docs/grading.md, "The rubric"), read from the installed checks'
    source (not imported): the first SPEC.md section its docstring names, else its module
    docstring's, else the first docs/ section either names."""
    found = {}
    for file, name, own, module in checks_in_source():
        own, module = " ".join(own.split()), " ".join(module.split())
        named = (_SPEC.search(own) or _SPEC.search(module) or _DOCS.search(own) or
                 _DOCS.search(module))
        if named is None:
            raise ValueError(f"{file}::{name} cites no section (of the spec, or of docs/): "
                             "its area is unknown")
        found[name] = named.group(1)
    return found


RULES_AREA = "The rules"  # the area whose tests of one rule's row go to its group's


def topic_areas() -> dict[str, str]:
    """topic -> its area: the checks' TOPIC_AREAS (test_semantics.py's), read from the
    source as the areas of the checks are."""
    found: dict[str, str] = {}
    for path in sorted(CHECKS.glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "TOPIC_AREAS" for t in node.targets):
                found.update(ast.literal_eval(node.value))
    return found


def area_of(check: str, params: dict, checks: dict[str, str], topics: dict[str, str]) -> str:
    """The area of one test of `check` (docs/grading.md, "The rubric"), from what the test is
    parametrized by: a `topic`'s area (`topics`, from topic_areas); for a check of the area
    "The rules", the group of the rule whose row a parameter names first ("mul/second",
    "reduce-max": "The rules: arithmetic", "The rules: reduce and movement"); else its
    check's (`checks`, from areas), or "" for a check that has none."""
    from gradient_conformance.reference.rules import rule_group
    topic = params.get("topic")
    if isinstance(topic, str) and topic in topics:
        return topics[topic]
    base = checks.get(check, "")
    if base == RULES_AREA:
        for value in params.values():
            group = rule_group(value.split("/")[0]) if isinstance(value, str) else None
            if group is not None:
                return f"{RULES_AREA}: {group}"
    return base


def area_names() -> list[str]:
    """Every area a test can belong to, sorted: each check's, each topic's, and each rule
    group's (reference/rules.py, RULE_GROUPS)."""
    from gradient_conformance.reference.rules import RULE_GROUPS
    return sorted({*areas().values(), *topic_areas().values(),
                   *(f"{RULES_AREA}: {group}" for group in RULE_GROUPS)})
