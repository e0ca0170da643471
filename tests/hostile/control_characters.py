"""Rejects every gradient with a message full of control characters and a right-to-left
override: the report must show them, not pass them on."""

from gradient_conformance.implementations import fast

NAME = "ctl\x1b[31m\u202e"


def build(source):
    if "gradient" in source:
        raise ValueError("nul\x00 esc\x1b[2J rlo\u202eevil bell\x07")
    return fast.build(source)
