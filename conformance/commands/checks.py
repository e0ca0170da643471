"""`gradient-conformance checks`: the suite's checks, a line each, to pick from with `-k`.
docs/suite.md, "The conformance suite".

Read from the checks' source (their names and the first line of their docstrings), not by
importing them, so that it answers at once and says nothing the checks do not say.
"""

from __future__ import annotations

from gradient_conformance.conformance.areas import CHECKS, checks_in_source


def listed() -> list[tuple[str, str, str]]:
    """(file, check, what it checks) for every check, in file order: the first sentence of
    its docstring, or of its module's where it has none."""
    return [(file, name, _sentence(own) or _sentence(module))
            for file, name, own, module in checks_in_source()]


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
