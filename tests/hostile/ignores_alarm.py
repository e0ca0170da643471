"""Ignores SIGALRM and swallows every exception while it spins in build."""

import signal
import time

signal.signal(signal.SIGALRM, signal.SIG_IGN)


def build(source):
    while True:
        try:
            time.sleep(3600)
        except BaseException:  # noqa: BLE001 - that is the point
            pass
