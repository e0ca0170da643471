"""JAX under `jax.jit` as an implementation: `--impl=adapters.jax_jit_impl`. docs/adapters.md,
"Adapters".

The JAX adapter (adapters/jax_impl.py) with the whole run compiled by `jax.jit`: the program,
its gradients (`jax.grad` inside the trace) and its loads and stores become one XLA
computation, which XLA may fuse and reorder as it likes. Beside eager JAX in the table, so
that what compiling changes shows. An index computed from the inputs is a tracer, which the
kit's load and store cannot turn into a number: jax.jit's own refusal, passed on.
"""

from __future__ import annotations

import jax

from gradient_conformance.adapters.jax_impl import Jax


class JaxJit(Jax):
    name = "jax.jit"

    def compile(self, function, example):
        return jax.jit(function)


FRAMEWORK = JaxJit()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
