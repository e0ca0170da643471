"""Accepts every program, syntax errors included, and returns its inputs unchanged."""


def build(source):
    return lambda buffers: buffers
