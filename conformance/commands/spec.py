"""`gradient-conformance spec [SECTION]`: the project's SPEC.md (or VECTORS.md), as the
installed package ships it, so that a message citing a section can be followed anywhere."""

from __future__ import annotations

import re

from gradient_conformance import resource

HEADING = re.compile(r"^(#{1,4}) (.+)$")


def sections(text: str) -> list[tuple[int, str, int]]:
    """(level, title, line index) of each heading, code blocks excepted."""
    found, fenced = [], False
    for k, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        match = HEADING.match(line)
        if match and not fenced:
            found.append((len(match.group(1)), match.group(2).strip(), k))
    return found


def section(text: str, wanted: str) -> str | None:
    """The section whose heading is `wanted` (or, failing that, contains it, ignoring
    case), up to the next heading of its level or above."""
    lines, heads = text.splitlines(), sections(text)
    key = wanted.strip().strip('"').lower()
    for exact in (True, False):
        for n, (level, title, start) in enumerate(heads):
            if (title.lower() == key) if exact else (key in title.lower()):
                end = next((s for lv, _, s in heads[n + 1:] if lv <= level), len(lines))
                return "\n".join(lines[start:end]).rstrip() + "\n"
    return None


DOCUMENTS = ("SPEC.md", "VECTORS.md")  # what the package ships, and `spec NAME` prints whole


def show(wanted: str | None, *, document: str = "SPEC.md") -> int:
    named = next((d for d in DOCUMENTS if wanted is not None and
                  wanted.strip().lower() in (d.lower(), d.lower().removesuffix(".md"))), None)
    if named is not None:
        print(resource(named).read_text(encoding="utf-8"), end="")
        return 0
    text = resource(document).read_text(encoding="utf-8")
    if wanted is None:
        for level, title, _ in sections(text):
            print("  " * (level - 1) + title)
        return 0
    found = section(text, wanted)
    if found is None:
        raise ValueError(f"{document} has no section {wanted!r}; `gradient-conformance spec` "
                         "lists them")
    print(found, end="")
    return 0


def add_parser(commands) -> None:
    parser = commands.add_parser("spec", help="print a section of the project's SPEC.md")
    parser.add_argument("section", nargs="?", default=None,
                      help="a heading, or part of one; SPEC.md or VECTORS.md for the whole "
                           "document; without it, the list of sections")
    parser.add_argument("--vectors", action="store_true", help="VECTORS.md instead")


def run(args) -> int:
    return show(args.section, document="VECTORS.md" if args.vectors else "SPEC.md")

