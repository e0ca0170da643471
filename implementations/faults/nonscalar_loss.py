"""Seeded fault nonscalar_loss: see implementations/faults/__init__.py."""

from gradient_conformance.implementations.faults import seeded

build, NAME, VERSION, CAPABILITIES = seeded("nonscalar_loss")
