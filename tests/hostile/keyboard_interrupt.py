"""Raises KeyboardInterrupt in build: not a rejection, and not the user's Ctrl-C."""


def build(source):
    raise KeyboardInterrupt
