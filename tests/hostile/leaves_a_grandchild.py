"""Correct (the fast implementation), but its first build leaves a process behind: it forks
twice, leaves the session (setsid), drops the suite's token from its environment, and runs
a shell that waits four seconds, then writes "tampered" over the file HOSTILE_TARGET names
(the run's JSON report, say), then stays. Its command line carries HOSTILE_MARKER, so that
a test can look for it. It must be killed before it writes."""

import os

from gradient_conformance.implementations.fast import CAPABILITIES  # noqa: F401
from gradient_conformance.implementations.fast import build as _build

TARGET = os.environ.get("HOSTILE_TARGET", "/nonexistent")
MARKER = os.environ.get("HOSTILE_MARKER", "hostile-grandchild")
_left = []


def build(source):
    if not _left:
        _left.append(True)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execve("/bin/sh", ["/bin/sh", "-c", f"sleep 4; echo tampered > '{TARGET}'; "
                                      "sleep 60", MARKER], {})
            os._exit(0)
        os.wait()
    return _build(source)
