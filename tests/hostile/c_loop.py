"""Hangs in C, never checking signals: a regular expression that backtracks for ever."""

import re

from gradient_conformance.implementations import fast


def build(source):
    fast.build(source)

    def run(buffers):
        re.match(r"(a*)*b", "a" * 64)
    return run
