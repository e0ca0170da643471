"""A cmd: server whose replies nest arrays 20,000 deep: the first one (its answer to the
suite's probe) with the argument `first`, else its answers to `run` requests."""

import sys

import _server

DEEP = "[" * 20_000 + "]" * 20_000
FIRST = sys.argv[1:] == ["first"]


def misbehave(request):
    if FIRST or "run" in request:
        sys.stdout.write(f'{{"id": {request["id"]}, "ok": true, "buffers": {DEEP}}}\n')
        sys.stdout.flush()
        return True
    return False


_server.run(misbehave)
