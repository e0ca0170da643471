"""The adapter kit: run the suite against your own autodiff system. docs/adapters.md, "Adapters";
README.md, "Adapt your framework".

You give what your system has: its values to and from numpy, one function per IR op (the
table `ops`), and how it takes a gradient. The kit gives the rest: `build` and `run` as the
protocol wants them, the IR's structure check by the reference (names, dtypes, shapes,
scopes, calls), ranges, calls, loads and stores, literals, and the capabilities a framework
claims. Every number and every derivative is your system's own.

Pick the path of your kind of system:

1. **Values, with `grad(y, x)`** (PyTorch, TensorFlow's tape, tinygrad): subclass
   `Framework`; `grad` gives dy/dx, itself differentiable, zeros where y does not depend on
   x, and `watch` marks an input where it must be. adapters/torch_impl.py:

       def grad(self, y, x):
           (g,) = torch.autograd.grad(y, x, create_graph=True, allow_unused=True)
           return torch.zeros_like(x) if g is None else g

2. **Leaves only** (a fresh leaf, the computation again, its `.grad`; MXNet, micrograd-like
   systems): subclass `FunctionalFramework`; the kit records how each value was made and
   hands `grad_function` a function f that recomputes y from a new x:

       def grad_function(self, f, x):
           leaf = x.detach().clone().requires_grad_(True)
           y = f(leaf)
           if not y.requires_grad:  # f may return a value your system does not track:
               return zeros_like(x)  # y does not depend on x, and its derivative is zeros
           y.backward()
           return leaf.grad

3. **Functions** (JAX, HIPS autograd): `FunctionalFramework` as above, with
   `return jax.grad(f)(x)`; a gradient inside f is again `grad_function`, so gradients of
   gradients nest as your system nests them.

4. **Symbolic graphs** (PyTensor, TensorFlow 1): `Framework`, whose ops build the graph and
   whose `grad` is the graph's (`pytensor.grad(y, x)`), and `compile(function, example)`,
   which the kit hands the whole run as a function of the buffers' contents, once per build
   (`pytensor.function`, `jax.jit`, `torch.compile`); without it the program runs eagerly.

5. **Kernels and flat arrays, with a tape** (NVIDIA Warp, Dr.Jit): set `flat = True`. Your
   values are flat arrays; the kit lowers the IR's shapes onto your elementwise ops and one
   `gather` (adapters/lowering.py: expand, reduce, reshape, loads, stores and literals, with
   the index maps written once), so you give no reduce, expand or reshape. Every op is
   called with keywords `dtype` (your dtype object of its result) and `shape` (the IR shape
   of its result), on operands of exactly that many elements (the kit spreads scalars);
   `gather(a, index, dtype=, shape=)` is `out[i] = a[index[i]]`, and its derivative your
   system's own (a scatter-add). Take gradients as in 2. adapters/warp_impl.py:

       def add(a, b, *, dtype, shape):
           out = wp.empty(math.prod(shape), dtype=dtype, requires_grad=True)
           wp.launch(add_kernel, dim=out.shape[0], inputs=[a, b, out])
           return out

       def grad_function(self, f, x):
           leaf = wp.clone(x, requires_grad=True)
           with wp.Tape() as tape:
               y = f(leaf)
           if y.requires_grad:
               tape.backward(grads={y: wp.ones(1, dtype=wp.float32)})
           return wp.clone(leaf.grad)

The table `ops` of paths 1 to 4, keyed by IR op name (ir.md): the elementwise ops `add mul
max idiv mod shl shr and or xor cmplt cmpne recip exp2 log2 sqrt sin where detach` take the
operands; the others take an operand and keywords:

    reduce(a, op="add"|"max"|"mul", axes=(...), keepdims=bool)   axes never empty
    cast(a, dtype=...)  bitcast(a, dtype=...)                      your dtypes[...]
    expand(a, shape=(...))  reshape(a, shape=(...))

Loads and stores of one element are built from `reshape`, `expand`, `where` and indexing
(`value[i]`); override `get_element`, `set_element` and `broadcast_to` where your system has
something better.

An op you leave out is one your system does not have: declare it in `capabilities`
("unsupported", or "and:bool" for one dtype of it), or the suite reports every program that
uses it. Declare also what the suite must know to be fair (SPEC.md, "The protocol"):
`"integer_division_traps": True` where a divisor of zero kills the process (the suite then
sends none, and the kit's build runs on ones, not zeros), `"float64_gradients": True` with
`"bit_exact_gradients": False` where gradients are computed in float64, and
`"environment": ["NAME"]` for the variables your process needs (the user passes each with
`--pass-env NAME`; one not passed is a usage error naming that option).

A build that your system refuses while running the program once on zeros is a rejection:
the kit makes up no rejection of its own (the spec's rejection rules are the suite's checks
of your system, not the kit's). Your process has no gmpy2 unless you load it (the kit's
parse rounds without it), so a trap in your system is reported as the signal it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, ClassVar, cast

import numpy as np

from gradient_conformance.adapters.eager import (
    FRAMEWORK_CAPABILITIES,
    NUMPY,
    Backend,
    Program,
    RecordingBackend,
    Value,
    build_with,
    recompute,
    reduce_axes,
    shape_of,
)
from gradient_conformance.adapters.lowering import Flat, Lowering

__all__ = ["FRAMEWORK_CAPABILITIES", "Framework", "FunctionalFramework"]

# The ops that take keywords, and what the kit derives for loads, stores and broadcasts.
KEYWORD_OPS = frozenset({"reduce", "cast", "bitcast", "expand", "reshape"})
DERIVED = frozenset({"element", "with_element", "broadcast"})


def _apply_op(f, name: str, values: list, attrs):
    """An IR op, with its attributes, applied to framework f's values through its table (or,
    for a flat system, lowered onto it)."""
    attrs = dict(attrs or {})
    if name == "reduce":
        rank = len(values[0].shape if f.flat else f.shape(values[0]))
        attrs = {"op": attrs["op"], "axes": reduce_axes(attrs, rank),
                 "keepdims": attrs.get("axis") is not None}
        if not attrs["axes"]:  # a reduce over no axes is its operand (ir.md)
            return values[0]
    elif name in ("expand", "reshape"):
        attrs = {"shape": shape_of(attrs["shape"])}
    if f.flat:
        return Lowering(f).op(name, values, attrs)
    if name not in f.ops:
        # The adapter's omission (an op it has not declared unsupported): a crash, as every
        # NotImplementedError from build is (impl-protocol.md), not the system's rejection.
        raise NotImplementedError(f"{f.name} has no {name} in its adapter's table")
    fn = f.ops[name]
    if name not in KEYWORD_OPS:
        return fn(*values)
    a = values[0]
    if name in ("cast", "bitcast"):
        return fn(a, dtype=f.dtypes[attrs["dtype"]])
    return fn(a, **attrs)


class _Common:
    """What every kind of system gives and derives."""

    name = "framework"
    version = ""
    capabilities = FRAMEWORK_CAPABILITIES
    flat = False  # True: your values are flat arrays, and the kit lowers shapes onto them
    dtypes: ClassVar[dict] = {}  # "f32", "i32", "bool" -> your dtype objects
    ops: ClassVar[dict] = {}  # IR op name -> your function (the module's docstring)

    def tensor(self, array: np.ndarray):
        """Your system's value of a numpy array (f32, int32 or bool; any rank, 0 included;
        flat: always rank 1)."""
        raise NotImplementedError

    def numpy(self, value) -> np.ndarray:
        """A value of yours as a numpy array."""
        raise NotImplementedError

    def shape(self, value) -> tuple[int, ...]:
        return tuple(value.shape)

    def around_run(self):
        """A context around each whole run of a program: TensorFlow's tape goes here."""
        return contextlib.nullcontext()

    def compile(self, function, example: dict):
        """A compiler's version of `function`, which maps the buffers' contents (name -> your
        value) to their contents after the run: `jax.jit(function)`, `torch.compile(function)`.
        `example` is the first call's argument, for a compiler that wants shapes and dtypes
        first. By default there is none: the program runs eagerly, op by op."""
        return function

    def wrap(self, array):
        """One of your values as the kit holds it (FunctionalFramework: with its record)."""
        return array

    def unwrap(self, value):
        return value

    def build(self, source: str):
        """The protocol's build: the structure checked, the program run once on zeros (ones,
        where integer division traps; what your system refuses there is a rejection), and
        its run returned."""
        traps = self.capabilities.get("integer_division_traps", False)
        # A framework is a Backend by duck typing: it gives what Backend's methods describe.
        return build_with(source, cast(Backend, self), _Whole, fill=1 if traps else 0)

    # --- derived: override where your system has better -----------------------------------

    def get_element(self, a, index: int):
        """Element `index` of a, flattened: a load with an index."""
        if self.flat:
            return Lowering(self).element(a, index)
        return self.ops["reshape"](a, shape=(-1,))[index]

    def set_element(self, a, index: int, e):
        """a with element `index` (flattened) replaced by the scalar e, out of place: a store
        with an index."""
        if self.flat:
            return Lowering(self).with_element(a, index, e)
        shape = self.shape(a)
        size = int(np.prod(shape))
        mask = np.zeros(size, np.bool_)
        mask[index] = True
        flat = self.ops["reshape"](a, shape=(size,))
        # The scalar spread along an axis of size 1, not a new axis, and not by where's own
        # broadcasting: autograd's derivatives get both of those wrong, and a store is not
        # the place to find out.
        spread = self.ops["expand"](self.ops["reshape"](e, shape=(1,)), shape=(size,))
        return self.ops["reshape"](self.ops["where"](self.tensor(mask), spread, flat),
                                   shape=shape)

    def broadcast_to(self, a, shape, dtype: str):
        """The scalar a, cast to `dtype` and spread to `shape`: a store without an index."""
        if self.flat:
            return Lowering(self).broadcast(a, tuple(shape), dtype)
        return self.ops["expand"](self.ops["cast"](a, dtype=self.dtypes[dtype]),
                                  shape=tuple(shape))

    # --- the eager interpreter's backend, through wrap and unwrap ---------------------------

    def _held(self, array: np.ndarray, dtype: str):
        """A numpy array as the kit holds your value of it (flat: with its IR dtype, shape)."""
        if self.flat:
            return Flat(self.tensor(np.ascontiguousarray(array).reshape(-1)), dtype,
                        tuple(array.shape))
        return self.tensor(array)

    def literal(self, operand):
        if operand.kind == "f32":  # the literal's bits, as the reference rounded them
            array = np.array(operand.value, np.uint32).view(np.float32)
        else:
            array = np.array(operand.value, NUMPY[operand.kind])
        return self.wrap(self._held(array, operand.kind))

    def _as_numpy(self, value) -> np.ndarray:
        """A value as the kit holds it, as numpy (flat: its system array's elements)."""
        value = self.unwrap(value)
        return np.asarray(self.numpy(value.array if self.flat else value))

    def to_numpy(self, value, dtype, shape):
        return self._as_numpy(value).astype(NUMPY[dtype]).reshape(shape)

    def index(self, value):
        return int(self._as_numpy(value).reshape(-1)[0])


class Framework(_Common, Backend):
    """A system that differentiates values: give `grad(y, x)`, and `watch(value)` if an
    input must be marked before a gradient can be taken against it."""

    def grad(self, y, x):
        """dy/dx, itself differentiable (a gradient of a gradient is taken against it), and
        zeros where y does not depend on x."""
        raise NotImplementedError

    def watch(self, value):
        """An f32 input, made differentiable (torch's requires_grad_, a tape's watch)."""
        return value

    def from_numpy(self, array, dtype):
        value = self._held(np.array(array, NUMPY[dtype]), dtype)
        if dtype != "f32":
            return value
        if self.flat:
            return dataclasses.replace(value, array=self.watch(value.array))
        return self.watch(value)

    def gradient(self, y, x):
        if self.flat:
            return Flat(self.grad(y.array, x.array), "f32", x.shape)
        return self.grad(y, x)

    def op(self, name, operands, attrs):
        return _apply_op(self, name, operands, attrs)

    def element(self, value, index):
        return self.get_element(value, index)

    def with_element(self, value, index, element):
        return self.set_element(value, index, element)

    def broadcast(self, value, shape, dtype):
        return self.broadcast_to(value, shape, dtype)


class FunctionalFramework(_Common, RecordingBackend):
    """A system that differentiates functions, or only fresh leaves: give
    `grad_function(f, x)`, the derivative of f at x. f maps one of your values (x's shape and
    dtype) to y; y may be a value your system does not track (a constant, when y does not
    depend on x: its derivative is then zeros). Give a derivative that is itself
    differentiable where your system can (jax.grad(f)(x)); one that is not, and declare
    `higher_order` unsupported, where it cannot."""

    WITH_ATTRS = KEYWORD_OPS | DERIVED

    def grad_function(self, f, x):
        raise NotImplementedError

    def apply(self, op, arrays, attrs):
        if op == "element":
            return self.get_element(arrays[0], attrs["index"])
        if op == "with_element":
            return self.set_element(arrays[0], attrs["index"], arrays[1])
        if op == "broadcast":
            return self.broadcast_to(arrays[0], attrs["shape"], attrs["dtype"])
        return _apply_op(self, op, arrays, attrs or {})

    def from_numpy(self, array, dtype):
        return Value(self._held(np.array(array, NUMPY[dtype]), dtype))

    def wrap(self, array):
        return Value(array)

    def unwrap(self, value):
        return value.array

    def grad_array(self, y: Value, x: Value):
        return self._grad(y, x, x.array)

    def _grad(self, y: Value, x: Value, x_array, outer=None):
        """The derivative of y as a function of x, at x_array. Inside an outer gradient
        (`outer`: its variable and the array it was given), that variable stays bound to what
        it was given, so the outer derivative sees through this one."""
        def f(new_x):
            bound = {id(outer[0]): outer[1]} if outer is not None and outer[0] is not x else {}
            bound[id(x)] = new_x
            return recompute(y, bound, self.apply, lambda node, gx, memo: self._grad(
                node.attrs["y"], node.attrs["x"], gx, outer=(x, new_x)))

        if not self.flat:
            return self.grad_function(f, x_array)
        shape = x_array.shape
        return Flat(self.grad_function(lambda new: f(Flat(new, "f32", shape)).array,
                                       x_array.array), "f32", shape)


class _Whole(Program):
    """A program whose every run happens inside the framework's `around_run` context and
    goes through what its `compile` made of the run (the run itself, by default)."""

    compiled = None
    backend: Any  # the kit's framework (_Common): Backend's methods and its own hooks

    def run(self, buffers):
        with self.backend.around_run():
            return super().run(buffers)

    def execute(self, memory: dict) -> dict:
        b = self.backend
        arrays = {n: b.unwrap(v) for n, v in memory.items()}
        if self.compiled is None:
            self.compiled = b.compile(self._pure, arrays)
        return {n: b.wrap(v) for n, v in self.compiled(arrays).items()}

    def _pure(self, arrays: dict) -> dict:
        """The run as a function of the buffers' contents (name -> the system's value) to
        their final contents: what a compiler compiles."""
        memory = super().execute({n: self.backend.wrap(a) for n, a in arrays.items()})
        return {n: self.backend.unwrap(v) for n, v in memory.items()}
