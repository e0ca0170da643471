"""Rejects with ten-megabyte messages everything it cannot get right anyway."""


def build(source):
    raise ValueError("x" * 10_000_000)
