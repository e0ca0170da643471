"""The reference oracle: slow, exact, and written to be read. SPEC.md is its definition.

`build(source)` is the protocol entry point (SPEC.md, "The protocol"): it parses, checks and
expands every gradient, or raises an IRError; it returns `run(buffers) -> buffers`.
`backprop(tape)` is the tape exercise's (SPEC.md, "Tapes").
"""

from __future__ import annotations

import numpy as np

from .builder import build_program
from .errors import BuildError, GradientError, IRError, ParseError, RunError
from .interp import NUMPY_DTYPES, Interpreter, from_numpy, to_numpy
from .program import Program
from .semantics import SPEC, Semantics
from .syntax import parse
from .tape import TapeError, backprop

NAME = "reference"
VERSION = "0.1.0"
CAPABILITIES = {"unsupported": [], "ulp": {}, "bit_exact_gradients": True}

__all__ = ["SPEC", "BuildError", "GradientError", "IRError", "ParseError", "Program",
           "RunError", "Semantics", "TapeError", "backprop", "build", "compile_program"]


def compile_program(source: str, semantics: Semantics = SPEC) -> Program:
    """Parse and build `source`: the checked program with every gradient expanded (by the
    spec, or by `semantics`)."""
    return build_program(parse(semantics.reads(source)), semantics)


class Runner:
    """The callable `build` returns: the program's run, on numpy arrays."""

    def __init__(self, program: Program, *, observe=None):
        self.program = program
        self.interpreter = Interpreter(program, program.semantics.domain, observe=observe)

    def __call__(self, buffers: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        memory = {}
        for slot, node in self.program.buffers.items():
            if slot not in buffers:
                raise RunError(node.line, str(slot), f"no initial contents for slot {slot} "
                               f"({node.dtype}{list(node.shape)})")
            given = np.asarray(buffers[slot])
            if given.shape != node.shape or given.dtype != np.dtype(NUMPY_DTYPES[node.dtype]):
                raise RunError(node.line, str(slot), f"slot {slot} is {node.dtype}"
                               f"{list(node.shape)}, and was given {given.dtype}"
                               f"{list(given.shape)}")
            memory[slot] = from_numpy(given, node.dtype, self.interpreter.domain)
        extra = set(buffers) - set(self.program.buffers)
        if extra:
            raise RunError(0, str(min(extra)), f"slot {min(extra)} is not declared by the "
                           "program")
        final = self.interpreter.run(memory)
        return {slot: to_numpy(final[slot], node.dtype, self.interpreter.domain)
                for slot, node in self.program.buffers.items()}




def build(source: str, semantics: Semantics = SPEC) -> Runner:
    """Parse, check and expand `source`; raise IRError if it is invalid."""
    return Runner(compile_program(source, semantics))
