"""Seeded tape fault tape_program_order: see implementations/faults/__init__.py."""

from gradient_conformance.implementations.faults import seeded_tape

backprop, NAME, VERSION, CAPABILITIES = seeded_tape("tape_program_order")
