"""Seeded fault reduce_mul_on_path: see implementations/faults/__init__.py."""

from gradient_conformance.implementations.faults import seeded

build, NAME, VERSION, CAPABILITIES = seeded("reduce_mul_on_path")
