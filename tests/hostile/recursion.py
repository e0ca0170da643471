"""A build that always dies of RecursionError: no rejection check may count it."""


def build(source):
    return build(source)
