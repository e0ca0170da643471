"""tape_student.py's backprop with its fault `depth_first` (run with --sandbox-bind on its
folder: it imports its sibling)."""

from tape_student import backprop_with

NAME = "tape-depth_first"


def backprop(tape):
    return backprop_with(tape, "depth_first")
