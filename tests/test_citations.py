"""Prose that points somewhere: every section of SPEC.md or docs/ cited in the project's
docstrings, comments and README names a heading of the document it names, every file path they
cite exists in the repository, and SPEC.md's Contents lists each of its sections. A reference
that no longer resolves fails here, naming where it stands."""

from __future__ import annotations

import ast
import io
import pathlib
import re
import tokenize

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ("reference", "generators", "conformance", "reports", "implementations", "adapters",
           "benchmarks", "tests", "docs")
# SPEC.md or a file of docs/, then quoted names: each quoted name after the citation is a section
# of that document. A name may run onto the next line (of a comment too: its `#` is then a
# space, as the line break is).
NAME = r'"(?:[^"\n]|\n[ \t]*#?[ \t]*){1,80}"'
CITATION = re.compile(
    r'(SPEC(?:\.md)?|docs/[\w-]+\.md),?\s+((?:' + NAME + r'(?:,\s*|\s+and\s+|\s*)?)+)')
QUOTED = re.compile(r'"((?:[^"\n]|\n[ \t]*#?[ \t]*){1,80})"')
# A file path: folders and a name with one of the project's extensions.
PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.(?:py|md|ir|json|txt|j2|mjs|toml))\b")


def sources() -> list[pathlib.Path]:
    found = [ROOT / "README.md", ROOT / "SPEC.md", ROOT / "VECTORS.md", ROOT / "Makefile",
             ROOT / "pyproject.toml"]
    for folder in FOLDERS:
        found += [p for p in sorted((ROOT / folder).rglob("*"))
                  if p.suffix in (".py", ".mjs", ".md") and "node_modules" not in p.parts]
    return found


def document(name: str) -> str:
    """A cited document's name as the repository has it: SPEC is SPEC.md."""
    return "SPEC.md" if name.startswith("SPEC") else name


def sections(name: str = "SPEC.md") -> set[str]:
    text = (ROOT / name).read_text()
    headings = {m.group(1).strip() for m in re.finditer(r"^#+\s+(.+)$", text, re.M)}
    # A paragraph's run-in heading, **Name.**, is a section too.
    run_in = set(re.findall(r"^\s*(?:- )?\*\*([^*\n]+?)\.\*\*", text, re.M))
    return headings | run_in | {h.split(":")[0] for h in headings}


def citations(text: str) -> list[tuple[int, str, str]]:
    """(line, document, section) of each citation in `text`."""
    found = []
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        found += [(line, document(match.group(1)), re.sub(r"\s*\n[ \t]*#?[ \t]*", " ", name))
                  for name in QUOTED.findall(match.group(2))]
    return found


# The folders a cited path starts from: the repository's, and the case files' own (cited as
# cases/ names them: examples/max_tie.ir). Any other path is an example of the user's.
ROOTS = (*FOLDERS, "cases", "gradient_conformance", *(p.name for p in (ROOT / "cases").iterdir()
                                                      if p.is_dir()))


def _exists(path: str, near: pathlib.Path) -> bool:
    """A path as the project writes one: from the repository's root, from a package's
    folder (conformance/running.py, or running.py's neighbours as transports/worker.py), or
    from the file's own folder."""
    candidates = [ROOT / path, near.parent / path, ROOT / "conformance" / path,
                  *(ROOT / folder / path for folder in FOLDERS),
                  ROOT / "gradient_conformance" / path, ROOT / "cases" / path,
                  ROOT.parent / "shared" / "spec" / path]
    return any(c.exists() for c in candidates)


def test_every_cited_section_is_a_heading_of_its_document():
    known: dict[str, set[str]] = {}
    missing = []
    for path in sources():
        for line, doc, name in citations(path.read_text()):
            if not (ROOT / doc).is_file():
                missing.append(f"{path.relative_to(ROOT)}:{line}: no document {doc}")
                continue
            if name not in known.setdefault(doc, sections(doc)):
                missing.append(f"{path.relative_to(ROOT)}:{line}: {doc}, \"{name}\"")
    assert missing == []


def test_spec_md_s_contents_lists_every_section_and_nothing_else():
    text = (ROOT / "SPEC.md").read_text()
    contents = text[text.index("Contents:"):text.index("\n\n", text.index("Contents:"))]
    listed = re.findall(r"\[([^\]]+)\]\(#", contents)
    assert listed == re.findall(r"^## (.+)$", text, re.M)


def test_every_document_is_served_by_the_spec_command():
    from gradient_conformance.conformance.commands.spec import DOCUMENTS, find
    docs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    assert set(docs) <= set(DOCUMENTS)
    for doc in ("SPEC.md", *docs):
        for title in re.findall(r"^## (.+)$", (ROOT / doc).read_text(), re.M):
            assert find(title)[0] == doc, (doc, title)


def prose(path: pathlib.Path) -> list[tuple[int, str]]:
    """(first line, text) of what is prose in `path`: a Python file's docstrings and
    comments (its strings are data: a test's files of a user's own), any other file whole."""
    text = path.read_text()
    if path.suffix != ".py":
        return [(1, text)]
    found = [(token.start[0], token.string) for token in tokenize.generate_tokens(
        io.StringIO(text).readline) if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) \
                and ast.get_docstring(node, clean=False):
            found.append((node.body[0].lineno, ast.get_docstring(node, clean=False)))
    return found


def test_every_cited_file_exists():
    missing = []
    for path in sources():
        for first, text in prose(path):
            missing += [f"{path.relative_to(ROOT)}:{first + text.count(chr(10), 0, m.start())}: "
                        f"{m.group(1)}" for m in PATH.finditer(text)
                        if m.group(1).split("/")[0] in ROOTS and not _exists(m.group(1), path)]
    assert missing == []


def test_the_readers_find_what_they_should():
    text = 'x (SPEC.md, "The walk" and "Hash consing"); SPEC, "Tapes".\nsee reference/ops.py'
    docstrings = [t for _, t in prose(pathlib.Path(__file__))]
    assert any(t.startswith("Prose that points somewhere") for t in docstrings)
    assert citations(text) == [(1, "SPEC.md", "The walk"), (1, "SPEC.md", "Hash consing"),
                               (1, "SPEC.md", "Tapes")]
    assert citations('docs/fuzzing.md, "History"') == [(1, "docs/fuzzing.md", "History")]
    spec = "SPEC" + ".md"  # not a citation of this file's own
    assert citations(f'({spec}, "Hash\n    # consing")') == [(1, "SPEC.md", "Hash consing")]
    assert PATH.findall(text) == ["reference/ops.py"]
