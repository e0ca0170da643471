"""A cmd: server that daemonizes: it forks, the child leaves the session (setsid) and forks
again, and that grandchild serves while the first two exit, and stays when its input ends.
It must not outlive the suite; its command line carries MARKER, so a test can look for it."""

import os
import sys
import time

import _server

MARKER = sys.argv[1] if len(sys.argv) > 1 else ""

if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
_server.run(lambda request: False)
time.sleep(600)
