"""The systems the project can run, as `gradient-conformance matrix --systems` runs them:
the adapters in this folder, each with the package it needs, and the two served from an
environment of their own. docs/adapters.md, "Adapters"; docs/reports.md, "The conformance table".

Data only: nothing here imports a system, so the matrix can ask which are installed.
"""

from __future__ import annotations

import pathlib

# The in-process adapters, each with the package it needs: compiled beside eager.
ADAPTERS = (("torch", "torch_impl"), ("torch", "torch_compile_impl"), ("jax", "jax_impl"),
            ("jax", "jax_jit_impl"), ("tinygrad", "tinygrad_impl"),
            ("tensorflow", "tensorflow_impl"), ("micrograd", "micrograd_impl"),
            ("autograd", "autograd_impl"), ("pytensor", "pytensor_impl"),
            ("warp", "warp_impl"), ("drjit", "drjit_impl"))
MXNET = "cmd:.venv-mxnet/bin/python -m gradient_conformance serve adapters.mxnet_impl"
TFJS = "cmd:node adapters/tfjs/server.mjs"


def systems(base: pathlib.Path) -> list[str]:
    """Every system that can run from `base` (a checkout, set up by make): the reference,
    the fast implementation, the adapters whose packages are installed, and the two served
    systems where their environments are."""
    import importlib.util
    found = ["reference", "implementations.fast"]
    found += [f"adapters.{module}" for package, module in ADAPTERS
              if importlib.util.find_spec(package) is not None
              and (package != "drjit" or _llvm19())]
    if (base / ".venv-mxnet" / ".ready").exists():
        found.append(MXNET)
    if (base / "adapters" / "tfjs" / "node_modules" / "@tensorflow" / "tfjs-core").is_dir():
        found.append(TFJS)
    return found


def _llvm19() -> bool:
    """Whether Dr.Jit's adapter finds the LLVM it needs (adapters/drjit_impl.py)."""
    import glob
    import os
    return bool(os.environ.get("DRJIT_LIBLLVM_PATH") or glob.glob("/usr/lib/*/libLLVM-19.so*"))
