"""Right (the reference), but its import takes HOSTILE_IMPORT_SECONDS (default 70): a fuzz
run shorter than that runs no case in its sessions, and must not read as a clean run."""

import os
import time

from gradient_conformance.reference import build  # noqa: F401

if os.environ.get("HOSTILE_SLOW_IMPORT"):  # the suite's own first load is quick
    time.sleep(float(os.environ.get("HOSTILE_IMPORT_SECONDS", "70")))
