"""A cmd: server that dies whenever it is asked to build a gradient."""

import os

import _server


def misbehave(request):
    if "gradient" in request.get("build", ""):
        os._exit(1)
    return False


_server.run(misbehave)
