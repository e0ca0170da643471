"""Dr.Jit as an implementation: `--impl=adapters.drjit_impl`. docs/adapters.md, "Adapters".

Dr.Jit's LLVM backend (`drjit.llvm.ad`): flat arrays traced and compiled by LLVM, so a flat
system on the adapter kit (adapters/kit.py), which lowers the IR's shapes onto its
elementwise ops and `dr.gather`. A gradient recomputes y from a fresh leaf copy of x with
`dr.enable_grad`, then `dr.backward(y)` and `dr.grad`; Dr.Jit's derivatives are first order,
so gradients of gradients are declared unsupported. It needs LLVM 19 or later (older ones
abort in `dr.maximum`): Debian's libllvm19, found here unless DRJIT_LIBLLVM_PATH says where.
"""

from __future__ import annotations

import glob
import os

for found in sorted(glob.glob("/usr/lib/*/libLLVM-19.so*"))[:1]:
    os.environ.setdefault("DRJIT_LIBLLVM_PATH", found)
if "DRJIT_LIBLLVM_PATH" not in os.environ:
    raise ImportError("Dr.Jit needs LLVM 19: install Debian's libllvm19, or set DRJIT_LIBLLVM_PATH")

import drjit as dr  # noqa: E402 - after the library is named
from drjit.llvm.ad import Bool, Float, Int  # noqa: E402

from gradient_conformance.adapters.kit import (  # noqa: E402
    FRAMEWORK_CAPABILITIES,
    FunctionalFramework,
)

# Each op of the kit's flat table is told its result's dtype (`dtype`, one of DTYPES) and
# shape; only cast, bitcast and gather need it.
OPS = {
    "add": lambda a, b, **_: a + b, "mul": lambda a, b, **_: a * b,
    "max": lambda a, b, **_: dr.maximum(a, b), "idiv": lambda a, b, **_: a // b,
    "mod": lambda a, b, **_: a % b, "shl": lambda a, b, **_: a << b,
    "shr": lambda a, b, **_: a >> b, "and": lambda a, b, **_: a & b,
    "or": lambda a, b, **_: a | b, "xor": lambda a, b, **_: a ^ b,
    "cmplt": lambda a, b, **_: a < b, "cmpne": lambda a, b, **_: a != b,
    "recip": lambda a, **_: dr.rcp(a), "exp2": lambda a, **_: dr.exp2(a),
    "log2": lambda a, **_: dr.log2(a), "sqrt": lambda a, **_: dr.sqrt(a),
    "sin": lambda a, **_: dr.sin(a), "where": lambda c, a, b, **_: dr.select(c, a, b),
    "detach": lambda a, **_: dr.detach(a), "cast": lambda a, dtype, shape: dtype(a),
    "bitcast": lambda a, dtype, shape: dr.reinterpret_array(dtype, a),
    "gather": lambda a, index, dtype, shape: dr.gather(dtype, a, index),
}
DTYPES = {"f32": Float, "i32": Int, "bool": Bool}
# Its integer division is LLVM's sdiv, which the CPU traps at a divisor of zero and at
# -2^31 / -1 (SIGFPE); its derivatives are first order.
CAPABILITIES = {**FRAMEWORK_CAPABILITIES, "integer_division_traps": True,
                "unsupported": ["higher_order"]}


class DrJit(FunctionalFramework):
    name, version, flat = "drjit", dr.__version__, True
    ops, dtypes = OPS, DTYPES
    capabilities = CAPABILITIES

    def tensor(self, array):
        return {"float32": Float, "int32": Int, "bool": Bool}[array.dtype.name](array)

    def numpy(self, value):
        return value.numpy()

    def grad_function(self, f, x):
        leaf = Float(x)
        dr.enable_grad(leaf)
        y = f(leaf)
        if dr.grad_enabled(y):  # else y does not depend on x: its derivative is zeros
            dr.backward(y)
        return Float(dr.grad(leaf))


FRAMEWORK = DrJit()
NAME, VERSION = FRAMEWORK.name, FRAMEWORK.version
build = FRAMEWORK.build
