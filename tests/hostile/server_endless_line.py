"""A cmd: server that answers a gradient with a line that never ends."""

import os

import _server


def misbehave(request):
    if "gradient" in request.get("build", ""):
        chunk = b"x" * 65536
        while True:
            os.write(1, chunk)
    return False


_server.run(misbehave)
