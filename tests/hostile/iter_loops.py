"""A backprop whose result's __iter__ never returns."""


class Forever:
    def __iter__(self):
        while True:
            pass


def backprop(tape):
    return Forever()
