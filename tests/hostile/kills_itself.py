"""Sends itself SIGKILL in build."""

import os
import signal


def build(source):
    os.kill(os.getpid(), signal.SIGKILL)
