"""Seeded tape fault tape_same_operand_once: see implementations/faults/__init__.py."""

from gradient_conformance.implementations.faults import seeded_tape

backprop, NAME, VERSION, CAPABILITIES = seeded_tape("tape_same_operand_once")
