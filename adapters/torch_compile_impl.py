"""PyTorch under `torch.compile` as an implementation: `--impl=adapters.torch_compile_impl`.
docs/adapters.md, "Adapters".

The PyTorch adapter (adapters/torch_impl.py) with the whole run compiled by `torch.compile`
(TorchDynamo capturing it, Inductor generating C++ for the CPU): beside eager PyTorch in the
table, so that what compiling changes shows. Dynamo breaks the graph where it cannot trace
(`torch.autograd.grad` among those places) and runs those parts eagerly, as it does for any
user's code. Each program compiles once, at build, which takes seconds.
"""

from __future__ import annotations

import torch

from gradient_conformance.adapters.torch_impl import Torch


class TorchCompile(Torch):
    name = "torch.compile"

    def compile(self, function, example):
        return torch.compile(function, backend="inductor", dynamic=False)


FRAMEWORK = TorchCompile()
NAME, VERSION, CAPABILITIES = FRAMEWORK.name, FRAMEWORK.version, FRAMEWORK.capabilities
build = FRAMEWORK.build
