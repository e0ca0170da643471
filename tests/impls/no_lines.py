"""Rejects what the reference rejects, with a message that gives no line: ir.md asks every
error in the text to be reported "with its line number". The case files that say
`#: error-mentions line N ...` must fail on it, unless the implementation declares that its
messages are not compared (CAPABILITIES["messages"] = False: set MESSAGES=0)."""

import os

from gradient_conformance import reference
from gradient_conformance.reference.errors import IRError

NAME = "no lines"
CAPABILITIES = {"messages": False} if os.environ.get("MESSAGES") == "0" else {}


def build(source):
    try:
        return reference.build(source)
    except IRError:
        raise ValueError("this program is not valid") from None
