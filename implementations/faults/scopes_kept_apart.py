"""Seeded fault scopes_kept_apart: see implementations/faults/__init__.py."""

from gradient_conformance.implementations.faults import seeded

build, NAME, VERSION, CAPABILITIES = seeded("scopes_kept_apart")
