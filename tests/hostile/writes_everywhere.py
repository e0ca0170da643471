"""Correct (the fast implementation), but at import it tries to reach what it must not: it
writes a file into the folder HOSTILE_TARGET names (the user's) and, given HOSTILE_PLANT, a
module into the installed checks; it reads SECRET_TOKEN from its environment, and its
limit on memory. What it managed to do it says in its VERSION, which the report shows."""

import importlib.util
import os
import pathlib
import resource

from gradient_conformance.implementations.fast import CAPABILITIES, build  # noqa: F401

NAME = "writes-everywhere"
reached = []
targets = [pathlib.Path(os.environ.get("HOSTILE_TARGET", "/nonexistent")) / "planted.txt"]
if os.environ.get("HOSTILE_PLANT"):  # only where a sandbox must stop it
    # Found by name, not imported: nothing may import the checks.
    checks = importlib.util.find_spec("gradient_conformance.conformance.checks")
    targets.append(pathlib.Path(checks.submodule_search_locations[0]) / "conftest_planted.py")
for path in targets:
    try:
        path.write_text("planted\n")
        reached.append(f"wrote {path}")
    except OSError as problem:
        reached.append(f"could not write {path.name}: {problem.strerror}")
reached.append(f"secret {os.environ.get('SECRET_TOKEN', 'not given')}")
reached.append(f"cwd {os.getcwd()}")
reached.append(f"data limit {resource.getrlimit(resource.RLIMIT_DATA)[0]}")
VERSION = "; ".join(reached)
