"""An eager interpreter of the IR over another system's tensors: what the adapters share.
docs/adapters.md, "Adapters".

An adapter is a `Backend`, one op table and one `grad`. This module runs the program with the
backend, statement by statement, as code written for that system would. Every number and
every gradient is the system's own.

- **Structure.** The IR's structure is checked by the reference, with every gradient stood in
  for by a value of x's shape and dtype (`structure`): names, dtypes, shapes, scopes and
  calls. A system has no opinion on these.
- **Gradients.** Whether a gradient is accepted is left to the system. `build` runs the
  program once on zeros, and what the system raises there is a rejection, but for Python's
  programming errors, which are crashes (`build_with`). The adapter makes up no rejection
  of its own.
- **Stores.** A store replaces the buffer's value out of place, so a gradient flows through
  memory wherever the system lets it.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np

from gradient_conformance.reference.builder import build_program, gradients_stood_in
from gradient_conformance.reference.errors import PROGRAMMING_ERRORS
from gradient_conformance.reference.interp import NUMPY_DTYPES
from gradient_conformance.reference.syntax import Operand, Statement, parse

# What a framework adapter claims: its exp2, log2 and sin within 2 ulps (none of them promise
# correct rounding), correct rounding elsewhere, and no bit-exact gradients (each sums and
# forms shares its own way). Claiming less would hide what the suite should show.
FRAMEWORK_CAPABILITIES = {"unsupported": [], "ulp": {"exp2": 2, "log2": 2, "sin": 2},
                          "bit_exact_gradients": False}
NUMPY = NUMPY_DTYPES  # IR dtype -> numpy dtype


def shape_of(shape) -> tuple[int, ...]:
    """An attribute's shape as a tuple (a single integer is a rank-1 shape)."""
    return (shape,) if isinstance(shape, int) else tuple(shape)


def reduce_axes(attrs: dict, rank: int) -> tuple[int, ...]:
    """The axes a `reduce` folds: all of them without `axis`, else the listed ones (a single
    integer is one axis)."""
    axis = attrs.get("axis")
    return tuple(range(rank)) if axis is None else shape_of(axis)


class IndexOutOfRange(IndexError):
    """A load or store index outside its buffer: the one run-time error of a valid program."""


def structure(source: str) -> list[Statement]:
    """Parse `source` and check everything but gradient acceptance with the reference, each
    gradient stood in for by a statement that decides nothing of it (`gradients_stood_in`:
    issue 53, `detach %x` of a buffer x was the kit's rejection, not the system's); the
    statements as written."""
    statements = parse(source)
    build_program(gradients_stood_in(statements))
    return statements


@dataclasses.dataclass
class Block:
    """A range body or a function body: its statements, blocks nested."""

    head: Statement | None  # None for the program's own, outermost block
    body: list  # Statement | Block

    @property
    def opened_by(self) -> Statement:
        """The range or def statement that opens a nested block."""
        assert self.head is not None, "the outermost block is opened by no statement"
        return self.head


def blocks(statements: list[Statement]) -> Block:
    root, stack = Block(None, []), []
    current = root
    for s in statements:
        if s.op in ("range", "def"):
            stack.append(current)
            inner = Block(s, [])
            current.body.append(inner)
            current = inner
        elif s.op == "end":
            current = stack.pop()
        else:
            current.body.append(s)
    return root


class Backend:
    """What a system provides. Values are the system's tensors (or scalars)."""

    name = "backend"
    version = ""

    def literal(self, operand):  # an f32, i32 or bool literal
        raise NotImplementedError

    def from_numpy(self, array: np.ndarray, dtype: str):
        raise NotImplementedError

    def to_numpy(self, value, dtype: str, shape) -> np.ndarray:
        raise NotImplementedError

    def op(self, name: str, operands: list, attrs: dict):
        raise NotImplementedError

    def element(self, value, index: int):
        raise NotImplementedError

    def with_element(self, value, index: int, element):
        raise NotImplementedError

    def broadcast(self, value, shape, dtype: str):
        raise NotImplementedError

    def gradient(self, y, x):
        """A `gradient y x` statement's value."""
        raise NotImplementedError

    def index(self, value) -> int:
        return int(np.asarray(self.to_numpy(value, "i32", ())).item())


class Value:
    """A value of a recording backend: its array, and how it was made (op, operands, attrs;
    op None for an input)."""

    __slots__ = ("array", "attrs", "op", "operands")

    def __init__(self, array, op=None, operands=(), attrs=None):
        self.array, self.op, self.operands, self.attrs = array, op, tuple(operands), attrs


def recompute(v: Value, bound: dict, apply, gradient):
    """v's array along the record, with the arrays in `bound` (id of a value -> array)
    standing for those values: deepest first, on an explicit stack (records can be deep).
    `apply(op, arrays, attrs)` computes an op; `gradient(node, x_array, memo)` a gradient
    node's array, given its x's array and what has been recomputed so far."""
    memo = dict(bound)
    stack = [v]
    while stack:
        top = stack[-1]
        if id(top) in memo:
            stack.pop()
        elif top.op is None:
            memo[id(top)] = top.array
            stack.pop()
        elif pending := [o for o in top.operands if id(o) not in memo]:
            stack.extend(pending)
        else:
            stack.pop()
            arrays = [memo[id(o)] for o in top.operands]
            memo[id(top)] = gradient(top, arrays[0], memo) if top.op == "gradient" else \
                apply(top.op, arrays, top.attrs)
    return memo[id(v)]


class RecordingBackend(Backend):
    """A backend whose values remember how they were made, for a system that differentiates
    functions (JAX) or only fresh variables (MXNet): its `gradient y x` recomputes y from a
    new x along the record. A subclass gives `apply` (one op on arrays), `WITH_ATTRS` (the
    ops `apply` passes attrs to) and `grad_array(y, x)`."""

    WITH_ATTRS: frozenset[str] = frozenset()

    def apply(self, op: str, arrays: list, attrs):
        raise NotImplementedError

    def grad_array(self, y: Value, x: Value):
        raise NotImplementedError

    def _make(self, op, operands, attrs=None) -> Value:
        return Value(self.apply(op, [o.array for o in operands], attrs), op, operands, attrs)

    def op(self, name, operands, attrs):
        return self._make(name, operands, attrs if name in self.WITH_ATTRS else None)

    def element(self, value, index):
        return self._make("element", [value], {"index": index})

    def with_element(self, value, index, element):
        return self._make("with_element", [value, element], {"index": index})

    def broadcast(self, value, shape, dtype):
        return self._make("broadcast", [value], {"shape": tuple(shape), "dtype": dtype})

    def gradient(self, y, x):
        return Value(self.grad_array(y, x), "gradient", [x], {"y": y, "x": x})


class Program:
    """A program over a backend: `run(buffers)` evaluates it from scratch each time."""

    def __init__(self, source: str, backend: Backend):
        self.statements = structure(source)
        self.backend = backend
        self.root = blocks(self.statements)
        self.slots = {s.target: (s.attr("slot"), s.attr("dtype"), _shape(s))
                      for s in self.statements if s.op == "buffer"}
        self.functions = {b.opened_by.operands[0].text: b for b in self.root.body
                          if isinstance(b, Block) and b.opened_by.op == "def"}

    def run(self, buffers: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        memory = {name: self.backend.from_numpy(np.asarray(buffers[slot]), dtype)
                  for name, (slot, dtype, _) in self.slots.items()}
        memory = self.execute(memory)
        return {slot: self.backend.to_numpy(memory[name], dtype, shape)
                for name, (slot, dtype, shape) in self.slots.items()}

    def execute(self, memory: dict) -> dict:
        """The statements run on the buffers' contents (name -> the system's value): their
        contents after."""
        self._block(self.root, {}, memory)
        return memory

    def _block(self, block: Block, env: dict, memory: dict):
        """Run a block's statements; a function body's return value, else None."""
        b = self.backend
        for s in block.body:
            if isinstance(s, Block):
                if s.opened_by.op == "range":
                    for i in range(cast(int, s.opened_by.operands[0].value)):
                        env[s.opened_by.target] = b.literal(_i32(i))
                        env[("counter", s.opened_by.target)] = i
                        self._block(s, env, memory)
                continue
            if s.op == "return":
                return self._value(s.operands[0], env)
            if s.op == "buffer":
                continue
            if s.op == "store":
                name = s.operands[0].text
                _, dtype, shape = self.slots[name]
                value = self._value(s.operands[1], env)
                if len(s.operands) == 3:
                    i = self._index(s.operands[2], env, shape, name)
                    memory[name] = b.with_element(memory[name], i, value)
                else:
                    memory[name] = b.broadcast(value, shape, dtype)
                continue
            if s.op == "load":
                name = s.operands[0].text
                shape = self.slots[name][2]
                value = memory[name] if len(s.operands) == 1 else \
                    b.element(memory[name], self._index(s.operands[1], env, shape, name))
            elif s.op == "call":
                function = self.functions[s.operands[0].text]
                params = [p.text for p in function.opened_by.operands[1:]]
                args = [self._value(o, env) for o in s.operands[1:]]
                value = self._block(function, dict(zip(params, args, strict=True)), memory)
            elif s.op == "gradient":
                # A buffer named as the loss or x is its contents, as code written for the
                # system would pass them: what the system makes of that is its own answer.
                y, x = (memory[o.text] if o.kind == "name" and o.text in self.slots
                        else self._value(o, env) for o in s.operands)
                value = b.gradient(y, x)
            else:
                value = b.op(s.op, [self._value(o, env) for o in s.operands], dict(s.attrs))
            env[s.target] = value
        return None

    def _value(self, operand, env):
        if operand.kind == "name":
            return env[operand.text]
        return self.backend.literal(operand)

    def _index(self, operand, env, shape, name) -> int:
        """A load's or store's index as a number. A literal or a range's counter is one
        already: the system is asked only for an index it computed (a compiler tracing the
        run may not be able to say)."""
        if operand.kind != "name":
            i = int(operand.value)
        elif ("counter", operand.text) in env:
            i = env[("counter", operand.text)]
        else:
            i = self.backend.index(self._value(operand, env))
        size = int(np.prod(shape))
        if not 0 <= i < size:
            raise IndexOutOfRange(f"index {i} out of range for {name} of {size} elements")
        return i


def _shape(s: Statement) -> tuple[int, ...]:
    return shape_of(s.attr("shape", ()))


def _i32(i: int):
    return Operand("i32", str(i), i)


def build_with(source: str, backend: Backend, kind: type[Program] = Program, *,
               fill: int = 0):
    """The protocol's build for an adapter: check the structure, then run once on zeros, so
    that what the system refuses (a non-scalar loss, an integer x) is refused at build, as
    the protocol wants. An index out of range there is a run-time matter: it is not refused.
    `fill`: the value of every input element there instead (1, for a system whose integer
    division traps: zeros would divide by zero). A programming error is raised as it is:
    the suite judges it against the adapter's CAPABILITIES["rejection"] as it judges any
    implementation's."""
    program = kind(source, backend)
    zeros: dict[int, np.ndarray] = {slot: np.full(shape, fill, NUMPY_DTYPES[dtype])
             for slot, dtype, shape in program.slots.values()}
    try:
        program.run(zeros)
    except IndexOutOfRange:
        pass
    except Exception as problem:
        if type(problem).__name__ in PROGRAMMING_ERRORS and \
                type(problem).__module__ == "builtins":
            # Python's programming error (impl-protocol.md), the system's or the adapter's,
            # left as it is: a crash, unless the adapter's CAPABILITIES["rejection"] names
            # the class as its system's deliberate answer, which the suite reads (calling.py,
            # loading.py). Wrapped, it would be the kit's rejection (issue 53: an
            # AttributeError passed two reject files).
            raise
        # The system refused the program (a RuntimeError of PyTorch's, say): its answer.
        raise Refused(f"{type(problem).__name__}: {problem}") from problem
    return program.run


class Refused(Exception):
    """The system refused a program the kit ran once at build: a deliberate rejection."""
