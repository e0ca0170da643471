"""Its build never returns: a loop in Python that takes every signal it is sent."""


def build(source):
    while True:
        pass
