"""Rejects every gradient with a message that holds a lone surrogate, under a name that holds
one too: the report must still be written, as UTF-8."""

from gradient_conformance.implementations import fast

NAME = "lone \ud800 surrogate"


def build(source):
    if "gradient" in source:
        raise ValueError("bad \udcff bytes \ud800")
    return fast.build(source)
