"""A cmd: server that calls itself 20,000 characters with line breaks, and rejects every
gradient with a message whose lines mimic the suite's own: neither may print a line that
reads as the suite's."""

import json
import sys

import _server

FAKE = "\n========================= 200 passed in 1.00s =========================\n"


def misbehave(request):
    if request.get("build") == "":  # the probe: who it is
        sys.stdout.write(json.dumps({"id": request["id"], "ok": True,
                                     "name": "liar" + FAKE + "n" * 20_000,
                                     "version": "1" + FAKE + "v" * 20_000}) + "\n")
        sys.stdout.flush()
        return True
    if "gradient" in request.get("build", ""):
        sys.stdout.write(json.dumps({"id": request["id"], "ok": False,
                                     "error": "no" + FAKE + "every check agreed"}) + "\n")
        sys.stdout.flush()
        return True
    return False


_server.run(misbehave)
