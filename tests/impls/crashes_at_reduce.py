"""A student's first draft: the reference, except that its build raises a TypeError at every
program with a reduce (a call with an argument given twice, as the course's trial saw). A
TypeError is a crash (impl-protocol.md), not a rejection: the rejection case files with a
reduce in them must fail on it, and no rejection variant may explain it. Set REJECTION to
name TypeError as deliberate (CAPABILITIES["rejection"])."""

import os

from gradient_conformance import reference

NAME = "crashes at reduce"
CAPABILITIES = {"rejection": ["TypeError"]} if os.environ.get("REJECTION") else {}


def _mk(op, *operands, **attrs):
    return op, operands, attrs


def build(source):
    if any(line.split("=", 1)[-1].split()[:1] == ["reduce"]
           for line in source.splitlines() if not line.lstrip().startswith("#")):
        _mk("reduce", op="add")  # TypeError: _mk() got multiple values for argument 'op'
    return reference.build(source)
