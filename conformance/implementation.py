"""Loading an implementation under test, and calling it without trusting it. SPEC.md, "The
protocol".

`load(spec)` takes what `--impl` takes: `reference`, an importable module name, a path to a
`.py` file, or `cmd:PROGRAM ARGS`. The `Implementation` it returns builds and runs programs
with a per-call timeout, and turns every misbehaviour (an exception, a hang, a crash of a
`cmd:` process, outputs of the wrong slots, dtypes or shapes) into an `Outcome` the checks can
report. Nothing an implementation does escapes as an exception into the suite.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import math
import numbers
import pathlib
import shlex
import signal
import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from reference.interp import NUMPY_DTYPES

from .protocol import BuildRejected, CommandImplementation, ImplementationFailure, RunFailed

DEFAULT_CAPABILITIES = {"unsupported": [], "ulp": {}, "bit_exact_gradients": True}


class Timeout(Exception):
    pass


@dataclass
class Outcome:
    """What happened when a case ran. `status`: "ok" (with `buffers`), "rejected" (build
    raised), "run-error" (run raised; `index` says it blamed an index), or "failure" (the
    implementation misbehaved: timeout, crash, junk, a wrong slot, dtype or shape)."""

    status: str
    buffers: dict[int, np.ndarray] = field(default_factory=dict)
    message: str = ""
    index: bool = False
    derivatives: list[int] = field(default_factory=list)  # a tape's, as f32 bit patterns


@contextmanager
def _deadline(seconds: float):
    """Raise Timeout in this (main) thread after `seconds`: an in-process implementation that
    hangs is interrupted, not waited for."""
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise Timeout(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Implementation:
    def __init__(self, spec: str, module=None, command: CommandImplementation | None = None,
                 *, timeout: float = 20.0):
        self.spec, self.module, self.command, self.timeout = spec, module, command, timeout
        # A cmd: implementation has no module: it claims everything, by its command's name.
        self.capabilities = {**DEFAULT_CAPABILITIES, **(getattr(module, "CAPABILITIES", None)
                                                        or {})}
        self.name = getattr(module, "NAME", None) or spec.removeprefix("cmd:")
        self.version = str(getattr(module, "VERSION", "") or "")

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}".strip()

    def provides(self, function: str) -> bool:
        """Whether the implementation defines this protocol function (`build`, `backprop`).
        A cmd: process is asked for both; it answers what it does not do with an error."""
        if self.command is not None:
            return True
        return callable(getattr(self.module, function, None))

    def run_backprop(self, tape) -> Outcome:
        """Backprop a tape: "ok" with the derivatives as f32 bits (each value returned must
        be an f32, one per entry), "rejected" if it raised, "failure" if it misbehaved."""
        try:
            with _deadline(self.timeout if self.command is None else 0):
                got = self.command.backprop(tape) if self.command is not None else \
                    self.module.backprop(copy.deepcopy(tape))
        except (Timeout, ImplementationFailure) as problem:
            return Outcome("failure", message=f"backprop: {problem}")
        except Exception as problem:  # noqa: BLE001 - any exception is a rejection
            return Outcome("rejected", message=_describe(problem))
        if self.command is not None:
            return Outcome("ok", derivatives=list(got))
        return _check_derivatives(got, len(tape))

    def unsupported(self) -> set[str]:
        return set(self.capabilities.get("unsupported") or [])

    def ulps(self, op: str) -> int:
        return int((self.capabilities.get("ulp") or {}).get(op, 0))

    def run_case(self, source: str, buffers: dict[int, np.ndarray],
                 declared: dict[int, tuple[str, tuple]]) -> Outcome:
        """Build and run; check the outputs' slots, dtypes and shapes against `declared`."""
        try:
            with _deadline(self.timeout if self.command is None else 0):
                run = self._build(source)
        except (Timeout, ImplementationFailure) as problem:
            return Outcome("failure", message=f"build: {problem}")
        except Exception as problem:  # noqa: BLE001 - any exception from build is a rejection
            return Outcome("rejected", message=_describe(problem))
        try:
            with _deadline(self.timeout if self.command is None else 0):
                out = run({k: v.copy() for k, v in buffers.items()})
        except (Timeout, ImplementationFailure) as problem:
            return Outcome("failure", message=f"run: {problem}")
        except RunFailed as problem:
            return Outcome("run-error", message=str(problem), index=problem.kind == "index")
        except Exception as problem:  # noqa: BLE001 - reported as a divergence by the checks
            return Outcome("run-error", message=_describe(problem),
                           index="range" in str(problem).lower())
        return _check_shape(out, declared)

    def build_only(self, source: str) -> Outcome:
        try:
            with _deadline(self.timeout if self.command is None else 0):
                self._build(source)
        except (Timeout, ImplementationFailure) as problem:
            return Outcome("failure", message=f"build: {problem}")
        except Exception as problem:  # noqa: BLE001
            return Outcome("rejected", message=_describe(problem))
        return Outcome("ok")

    def build(self, source: str):
        """The implementation's own build, untimed and unguarded: for benchmarks, which want
        nothing between the clock and the implementation."""
        return self._build(source)

    def _build(self, source: str):
        if self.command is not None:
            try:
                return self.command.build(source)
            except BuildRejected as rejected:
                raise ValueError(str(rejected)) from None
        return self.module.build(source)

    def close(self) -> None:
        if self.command is not None:
            self.command.close()


def _check_shape(out, declared) -> Outcome:
    if not isinstance(out, dict):
        return Outcome("failure", message=f"run returned {type(out).__name__}, not a dict")
    if set(out) != set(declared):
        return Outcome("failure", message=f"run returned slots {sorted(out)}, the program "
                       f"declares {sorted(declared)}")
    buffers = {}
    for slot, (dtype, shape) in declared.items():
        value = np.asarray(out[slot])
        if value.dtype != np.dtype(NUMPY_DTYPES[dtype]) or value.shape != tuple(shape):
            return Outcome("failure", message=f"slot {slot} came back as {value.dtype}"
                           f"{list(value.shape)}, declared {dtype}{list(shape)}")
        buffers[slot] = value
    return Outcome("ok", buffers)


def _check_derivatives(got, entries: int) -> Outcome:
    """A module's derivatives as f32 bits, or a failure saying why they are not derivatives:
    not a sequence of one number per entry, or a number that is not an f32 value."""
    try:
        values = list(got)
    except TypeError:
        return Outcome("failure", message=f"backprop returned {type(got).__name__}, not a list")
    if len(values) != entries:
        return Outcome("failure", message=f"backprop returned {len(values)} derivatives for "
                       f"{entries} entries")
    bits = []
    for k, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return Outcome("failure", message=f"derivative {k} is {v!r}, not a number")
        single = np.float32(v)
        if not (float(single) == float(v) or (np.isnan(single) and math.isnan(float(v)))):
            return Outcome("failure", message=f"derivative {k} is {float(v)!r}, which is not "
                           "an f32 value: computed in another precision?")
        bits.append(int(single.view(np.uint32)))
    return Outcome("ok", derivatives=bits)


def _describe(problem: BaseException) -> str:
    last = traceback.extract_tb(problem.__traceback__)[-1:] if problem.__traceback__ else []
    where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(problem).__name__}: {problem}{where}"


def load(spec: str, *, timeout: float = 20.0) -> Implementation:
    """What --impl names: reference, a module, a .py path, or cmd:PROGRAM ARGS."""
    if spec.startswith("cmd:"):
        argv = shlex.split(spec[4:])
        return Implementation(spec, command=CommandImplementation(argv, timeout=timeout),
                              timeout=timeout)
    if spec.endswith(".py"):
        path = pathlib.Path(spec).resolve()
        module_spec = importlib.util.spec_from_file_location(f"impl_{path.stem}", path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
        return _checked(Implementation(spec, module, timeout=timeout))
    return _checked(Implementation(spec, importlib.import_module(spec), timeout=timeout))


def _checked(impl: Implementation) -> Implementation:
    if not (impl.provides("build") or impl.provides("backprop")):
        raise ValueError(f"{impl.spec} defines neither build(source) nor backprop(tape): it "
                         "is not an implementation (SPEC.md, \"The protocol\")")
    return impl
