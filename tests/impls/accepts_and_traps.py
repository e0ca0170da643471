"""The reference where it accepts a program; where it rejects one, accepts it anyway and
returns its inputs unchanged (no value computed from any gradient); and it declares that
integer division traps. Found on six real systems (issue 53): every missed rejection then
went through the reducer's trap check, which failed on a candidate that no graph holds, and
a missed rejection was named by variants whose values it never gave."""

from gradient_conformance import reference
from gradient_conformance.reference.errors import IRError

NAME = "accepts-and-traps"
CAPABILITIES = {"integer_division_traps": True}


def build(source):
    try:
        return reference.build(source)
    except IRError:
        return lambda buffers: dict(buffers)
