"""A cmd: server that answers a gradient with bytes that are not UTF-8."""

import os

import _server


def misbehave(request):
    if "gradient" in request.get("build", ""):
        os.write(1, b'{"id": 1, "ok": \xff\xfe}\n')
        return True
    return False


_server.run(misbehave)
