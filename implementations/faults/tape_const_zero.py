"""Seeded tape fault tape_const_zero: see implementations/faults/__init__.py."""

from gradient_conformance.implementations.faults import seeded_tape

backprop, NAME, VERSION, CAPABILITIES = seeded_tape("tape_const_zero")
