"""A cmd: server that, asked to build a gradient, closes its stdout and stays alive."""

import os
import sys
import time

import _server


def misbehave(request):
    if "gradient" in request.get("build", ""):
        sys.stdout.close()
        os.close(1)
        time.sleep(3600)
    return False


_server.run(misbehave)
