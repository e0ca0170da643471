"""A backprop that returns one derivative too few."""

from gradient_conformance.implementations import fast


def backprop(tape):
    return fast.backprop(tape)[:-1]
