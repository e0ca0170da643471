"""gradient-conformance: the one import namespace of the installed package. docs/commands.md,
"Installing".

The repository keeps each layer in a top-level folder (reference/, generators/, conformance/,
reports/, implementations/, adapters/). Installed, each is a subpackage of this one:
pyproject.toml maps `gradient_conformance.reference` to reference/, and so on. So nothing the
package installs has a generic top-level name, and a user's own `reports` or `reference`
package can neither shadow a module of ours nor be shadowed by one. Outside reference/, every
import of the project goes through this namespace (ruff enforces it: pyproject.toml).

The data the suite ships (the case files, SPEC.md, VECTORS.md) sit in this folder: links to
the top-level files in a checkout, copies in the wheel. `resource()` finds them either way.

(PYTEST_DONT_REWRITE: the `gradient-conformance` command imports this package before pytest
starts, so pytest could not rewrite its asserts anyway, and would warn that it cannot.)
"""

from __future__ import annotations

import pathlib
import sys


def resource(*parts: str) -> pathlib.Path:
    """A file or folder the package ships: resource("cases", "tapes"), resource("SPEC.md")."""
    return pathlib.Path(__file__).parent.joinpath(*parts)


def without_paths(text: str, here: str | pathlib.Path) -> str:
    """`text` for every reader, not only this machine's: the interpreter's prefix, the folder
    `here` and the home folder replaced by names (<venv>, ., ~). A generated file (the
    matrix's markdown, benchmarks/RESULTS.md) is written through it."""
    for path, name in ((sys.prefix, "<venv>"), (str(here), "."),
                       (str(pathlib.Path.home()), "~")):
        if len(path) > 1:  # a home of "/" would take every slash
            text = text.replace(path + "/", name + "/").replace(path, name)
    return text
