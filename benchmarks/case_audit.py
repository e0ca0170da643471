"""`python -m benchmarks.case_audit`: which of the shipped case files the enumerations reach.
docs/generators.md, "Enumerations".

For each case file (`.ir`) the package ships, the conditions and products (reference/
conditions.py) the reference's own run of it takes, and which of them no enumerated program
(generators/enumerations.py: value classes, identity, rejections) takes: a file with none
left is, as far as the model can say, reached by the tables too, and stays only as a worked
example or a regression; a file with some left says what only it holds. Pairs are left out
(a program of one op and a gradient holds few), and so is how the text is written (a case
file's `#:` lines are comments). Figures, not a test.
"""

from __future__ import annotations

import sys

from gradient_conformance import resource
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.generators.enumerations import (
    enumerated_cases,
    identity_cases,
    rejection_cases,
)
from gradient_conformance.reference import cases


def taken(source: str, buffers) -> set[str]:
    reading = Reading(source)
    reading.outcome(buffers)
    return {n for n in reading.conditions(buffers) if not n.startswith(("pair.", "text."))}


def main() -> int:
    by_tables: set[str] = set()
    for case in [*enumerated_cases(), *identity_cases(), *rejection_cases()]:
        by_tables |= taken(case.source, case.buffers)
    root = resource("cases")
    reached, rows = 0, []
    for path in cases.case_paths([root]):
        if path.suffix != ".ir":
            continue
        case = cases.load_case(path)
        reading = Reading(case.source, measure=False)
        buffers = cases.initial_buffers(case, reading.slots) if reading.statements else {}
        names = taken(case.source, buffers)
        beyond = sorted(names - by_tables)
        reached += not beyond
        rows.append((path.relative_to(root).as_posix(), len(names), beyond))
    for name, count, beyond in rows:
        said = ", ".join(beyond[:4]) + (f" (+{len(beyond) - 4})" if len(beyond) > 4 else "")
        print(f"{name:48} {count:4}  {'reached by the tables' if not beyond else said}")
    print(f"\n{reached} of {len(rows)} case files take nothing the enumerations do not; "
          f"the enumerations take {len(by_tables)} conditions and products")
    return 0


if __name__ == "__main__":
    sys.exit(main())
