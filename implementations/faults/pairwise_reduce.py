"""Seeded fault pairwise_reduce: see implementations/faults/__init__.py."""

from gradient_conformance.implementations.faults import seeded

build, NAME, VERSION, CAPABILITIES = seeded("pairwise_reduce")
