"""A cmd: server that writes 256 MB to stderr before each gradient's reply, which is junk."""

import os
import sys

import _server


def misbehave(request):
    if "gradient" in request.get("build", ""):
        chunk = b"flood " * 10922 + b"\n"
        for _ in range(4096):
            os.write(2, chunk)
        sys.stdout.write("not a reply\n")
        sys.stdout.flush()
        return True
    return False


_server.run(misbehave)
