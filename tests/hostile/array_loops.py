"""Returns outputs whose __array__ never returns: converting them must be timed too."""

from gradient_conformance.implementations import fast


class Forever:
    def __array__(self, *args, **kwargs):
        while True:
            pass


def build(source):
    run = fast.build(source)
    return lambda buffers: {slot: Forever() for slot in run(buffers)}
