"""tape_student.py's backprop with its fault `zero_passes_nothing` (run with --sandbox-bind on its
folder: it imports its sibling)."""

from tape_student import backprop_with

NAME = "tape-zero_passes_nothing"


def backprop(tape):
    return backprop_with(tape, "zero_passes_nothing")
