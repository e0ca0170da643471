"""The shared body of the hostile cmd: servers: the fast implementation over the protocol,
except where a server's `misbehave(request)` does something else (and returns True)."""

import json
import sys

from gradient_conformance.conformance.transports.jsonlines import serve
from gradient_conformance.implementations import fast


def run(misbehave) -> None:
    def write(text):
        sys.stdout.write(text)
        sys.stdout.flush()

    def requests():
        for line in sys.stdin:
            if not misbehave(json.loads(line)):
                yield line

    serve(fast, requests(), write)
