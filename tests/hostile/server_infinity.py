"""A cmd: server whose replies carry JSON's missing Infinity."""

import sys

import _server


def misbehave(request):
    if "run" in request:
        sys.stdout.write(f'{{"id": {request["id"]}, "ok": true, "buffers": {{"0": '
                         '{"dtype": "f32", "shape": [], "bits": [Infinity]}}}\n')
        sys.stdout.flush()
        return True
    return False


_server.run(misbehave)
