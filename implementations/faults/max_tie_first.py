"""Seeded fault max_tie_first: see implementations/faults/__init__.py."""

from gradient_conformance.implementations.faults import seeded

build, NAME, VERSION, CAPABILITIES = seeded("max_tie_first")
