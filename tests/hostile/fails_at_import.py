"""Fails at import, in its own line 7."""

OPS = {"mul": 2}


def table():
    return OPS["add"]


TABLE = table()
