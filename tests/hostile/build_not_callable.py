"""Its build returns something that cannot be run: a number, where the protocol wants a
callable taking the buffers."""


def build(source):
    return 42
