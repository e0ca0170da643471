"""Ends its process with os._exit(0) in run: a success status must not pass for one."""

import os

from gradient_conformance.implementations import fast


def build(source):
    fast.build(source)

    def run(buffers):
        os._exit(0)
    return run
