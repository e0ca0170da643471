"""tape_student.py's backprop with its fault `numpy_sum` (run with --sandbox-bind on its
folder: it imports its sibling)."""

from tape_student import backprop_with

NAME = "tape-numpy_sum"


def backprop(tape):
    return backprop_with(tape, "numpy_sum")
