"""`gradient-conformance spec [SECTION]`: a section of the project's SPEC.md or of its design
documents (docs/), or VECTORS.md, as the installed package ships them, so that a message
citing a section can be followed anywhere. docs/commands.md, "The command line"."""

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


def section(text: str, wanted: str, *, exact: tuple[bool, ...] = (True, False),
            titles: bool = True) -> str | None:
    """The section whose heading is `wanted` (or, failing that, contains it, ignoring
    case), up to the next heading of its level or above. `exact`: which of the two tries to
    make; `titles`: whether a document's own title (its one `#` heading) may be the one."""
    lines, heads = text.splitlines(), sections(text)
    key = wanted.strip().strip('"').lower()
    for whole in exact:
        for n, (level, title, start) in enumerate(heads):
            if level == 1 and not titles:
                continue
            if (title.lower() == key) if whole else (key in title.lower()):
                end = next((s for lv, _, s in heads[n + 1:] if lv <= level), len(lines))
                return "\n".join(lines[start:end]).rstrip() + "\n"
    return None


# What the package ships, in the order a section is looked for; `spec NAME` prints one whole.
# The normative SPEC.md first, then the tool's design, a topic a file.
DOCUMENTS = ("SPEC.md", "docs/suite.md", "docs/isolation.md", "docs/diagnosis.md",
             "docs/reports.md", "docs/commands.md", "docs/fuzzing.md", "docs/adapters.md",
             "docs/generators.md", "docs/benchmarks.md", "docs/oracle.md", "docs/systems.md",
             "docs/tiers.md", "docs/grading.md",
             "VECTORS.md")


def _names(document: str, *, bare: bool) -> tuple[str, ...]:
    """What a user may type for a whole document: docs/fuzzing.md or fuzzing.md, and (`bare`)
    fuzzing, which a section of that name takes first."""
    base = document.lower().rsplit("/", 1)[-1]
    return (document.lower(), base, *((base.removesuffix(".md"),) if bare else ()))


def find(wanted: str, *, exact: tuple[bool, ...] = (True, False)
         ) -> tuple[str, str] | tuple[None, None]:
    """(document, text) of the section `wanted`: an exact heading in any document first, then
    a heading containing it, each in DOCUMENTS' order. A document's title is no section:
    `spec NAME.md` prints the document whole."""
    texts = {d: resource(*d.split("/")).read_text(encoding="utf-8") for d in DOCUMENTS}
    for whole in exact:
        for document, text in texts.items():
            found = section(text, wanted, exact=(whole,), titles=False)
            if found is not None:
                return document, found
    return None, None


def show(wanted: str | None, *, document: str | None = None) -> int:
    named = next((d for d in DOCUMENTS if wanted is not None and
                  wanted.strip().lower() in _names(d, bare=False)), None)
    if named is None and wanted is not None and document is None and \
            find(wanted, exact=(True,))[0] is None:
        named = next((d for d in DOCUMENTS if wanted.strip().lower() in _names(d, bare=True)),
                     None)
    if named is not None:
        print(resource(*named.split("/")).read_text(encoding="utf-8"), end="")
        return 0
    if wanted is None:
        for doc in (document,) if document else DOCUMENTS[:-1]:
            print(doc)
            for level, title, _ in sections(resource(*doc.split("/")).read_text("utf-8")):
                print("  " * level + title)
        return 0
    if document is not None:
        text = resource(*document.split("/")).read_text(encoding="utf-8")
        found = section(text, wanted)
    else:
        document, found = find(wanted)
    if found is None:
        raise ValueError(f"no section {wanted!r} in SPEC.md or docs/; `gradient-conformance "
                         "spec` lists them")
    print(f"({document})\n{found}", end="")
    return 0


def add_parser(commands) -> None:
    parser = commands.add_parser("spec", help="print a section of SPEC.md or of docs/")
    parser.add_argument("section", nargs="?", default=None,
                      help="a heading, or part of one; SPEC.md, VECTORS.md or a document "
                           "of docs/ (fuzzing) for the whole document; without it, the list "
                           "of sections")
    parser.add_argument("--vectors", action="store_true", help="VECTORS.md instead")


def run(args) -> int:
    return show(args.section, document="VECTORS.md" if args.vectors else None)

