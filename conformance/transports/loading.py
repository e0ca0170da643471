"""The implementation under test, as the checks see it: `load(spec)` and the `Outcome` of
each case. SPEC.md, "The protocol" and "Statuses"; docs/isolation.md, "Isolation".

`load` takes what `--impl` takes: `reference`, a module name, a path to a `.py` file, or
`cmd:PROGRAM ARGS`. A Python module runs in a worker process of its own (`Worker`), restarted
after any crash or timeout; `cmd:` programs speak JSON lines (jsonlines.py); and
`in_process=True` calls the module in the suite's own process, unprotected, for debugging.
Whatever the implementation does (raise, hang, crash, flood its output, return junk) comes
back as an `Outcome`; nothing it does escapes into the suite.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
from collections.abc import Callable
from typing import Protocol

import numpy as np

from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.tallies import Tally
from gradient_conformance.conformance.transports import calling
from gradient_conformance.conformance.transports.command import Command
from gradient_conformance.conformance.transports.confinement import (
    Confinement,
    Ended,
    default_memory_limit,
)
from gradient_conformance.conformance.transports.description import (
    FUNCTIONS,
    TEXT_LIMIT,
    describe_module,
)
from gradient_conformance.conformance.transports.in_process import InProcess
from gradient_conformance.conformance.transports.worker import LOAD_TIMEOUT, Worker
from gradient_conformance.reference.ops import FEATURES, TRANSCENDENTAL, elementwise
from gradient_conformance.reports.records import one_line, visible

DEFAULT_TIMEOUT = 20.0
DEFAULT_CAPABILITIES = {"unsupported": [], "ulp": {}, "bit_exact_gradients": True,
                        "integer_division_traps": False, "float64_gradients": False,
                        "environment": [], "rejection": [], "messages": True}
ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


# The implementation could not be started: a usage error, before any check runs.
LoadFailed = calling.LoadFailed


class Abandoned(BaseException):
    """Raised into a check that already saw the implementation time out, or restarted it
    RESTARTS_PER_CHECK times. It is no Exception, so Hypothesis lets it through instead of
    shrinking on: a hanging implementation costs one timeout per check (the case that hung
    is the one reported), and a crashing one a bounded number of restarts."""


RESTARTS_PER_CHECK = 10


class Transport(Protocol):
    """How the suite calls an implementation (docs/isolation.md, "Isolation"): `InProcess` (the
    suite's own process), `Worker` (a Python module in a worker process) and `Command` (a
    cmd: program over JSON lines). Whatever the implementation does comes back as an
    Outcome; none of these raises for anything the implementation did."""

    @property
    def restarts(self) -> int:
        """How many times the implementation was started again (after a crash or timeout)."""
        ...

    def case(self, source: str, buffers: dict[int, np.ndarray] | None,
             declared: dict[int, tuple[str, tuple]]) -> Outcome:
        """Build `source`, and (unless `buffers` is None) run it on `buffers`; the outputs
        are the `declared` slots."""
        ...

    def backprop(self, tape: list) -> Outcome:
        ...

    def build(self, source: str) -> Callable:
        """The implementation's own run callable, unguarded (benchmarks)."""
        ...

    def close(self) -> None:
        ...


class Implementation:
    """An implementation as the suite loaded it: what it said of itself, and its transport.
    It keeps no state of any check's; a check calls it through its `Guarded` view."""

    def __init__(self, spec: str, transport: Transport, *, name: str, version: str,
                 capabilities, functions: tuple[str, ...],
                 confinement: Confinement | None = None):
        self.spec, self.transport, self.functions = spec, transport, functions
        self.confinement = confinement
        self.name, self.version = visible(name), visible(version)
        self.capabilities = checked_capabilities(capabilities)

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}".strip()

    @property
    def restarts(self) -> int:
        return self.transport.restarts

    @property
    def ended(self) -> Ended:
        """What its transport had to end of it: processes left behind, memory restarts."""
        ended = getattr(self.transport, "ended", None)
        return ended if isinstance(ended, Ended) else Ended()

    def sweep(self) -> None:
        """End what its process left running detached (docs/isolation.md, "Isolation")."""
        getattr(self.transport, "sweep", lambda: None)()

    def provides(self, function: str) -> bool:
        return function in self.functions

    def unsupported(self) -> set[str]:
        return set(self.capabilities["unsupported"])

    def ulps(self, op: str) -> int:
        return int(self.capabilities["ulp"].get(op, 0))

    def described(self) -> dict:
        """What it said of itself, as the report and fuzz's driver keep it."""
        return {"name": self.name, "version": self.version, "spec": self.spec,
                "capabilities": self.capabilities}

    def run_case(self, source: str, buffers: dict[int, np.ndarray],
                 declared: dict[int, tuple[str, tuple]]) -> Outcome:
        """Build and run; the outputs are the declared slots, of the declared dtypes and
        shapes, or the outcome is a failure."""
        return self.judged(self.transport.case(source, buffers, declared))

    def build_only(self, source: str) -> Outcome:
        return self.judged(self.transport.case(source, None, {}))

    def judged(self, outcome: Outcome) -> Outcome:
        """A rejection by a crash (a built-in programming error raised from build or
        backprop, which CAPABILITIES["rejection"] does not name as deliberate) as the
        failure it is: impl-protocol.md; SPEC.md, "The protocol" and "Tapes"."""
        if outcome.status != "rejected" or not outcome.reason.startswith("crash:"):
            return outcome
        if outcome.reason.removeprefix("crash:") in self.capabilities["rejection"]:
            return Outcome("rejected", message=outcome.message)
        return Outcome("failure", message=f"rejected by a crash: {outcome.message}",
                       reason="crash")

    def run_backprop(self, tape) -> Outcome:
        return self.judged(self.transport.backprop(tape))

    def build(self, source: str):
        """The implementation's own run callable, unguarded: for benchmarks, which want
        nothing between the clock and the implementation (in-process and cmd: only)."""
        return self.transport.build(source)

    def close(self) -> None:
        self.transport.close()


class Guarded:
    """One check's view of the implementation: the same calls, each refused with Abandoned
    once the implementation timed out in this check or was restarted RESTARTS_PER_CHECK
    times in it. What the check saw of that is on its own record (`state`, its Tally), never
    on the implementation the session shares."""

    def __init__(self, impl: Implementation, state: Tally):
        self.impl, self.state = impl, state
        state.restarts_before = impl.restarts  # the check begins with the view
        self.capabilities, self.spec, self.label = impl.capabilities, impl.spec, impl.label
        self.unsupported, self.ulps, self.provides = impl.unsupported, impl.ulps, impl.provides

    def _guarded(self, outcome_of: Callable[[], Outcome]) -> Outcome:
        state = self.state
        if state.abandon:
            raise Abandoned(state.abandon)
        outcome = outcome_of()
        if outcome.reason == "timeout":
            state.timed_out = True
            state.abandon = ("the implementation timed out in this check, so the suite "
                             "stopped shrinking: the case reported is the one that hung")
        elif self.impl.restarts - state.restarts_before >= RESTARTS_PER_CHECK:
            state.abandon = (f"the implementation had to be started again "
                             f"{RESTARTS_PER_CHECK} times in this check, so the suite "
                             "stopped shrinking: the case reported is the smallest failing "
                             "one so far")
        return outcome

    def run_case(self, source: str, buffers: dict[int, np.ndarray],
                 declared: dict[int, tuple[str, tuple]]) -> Outcome:
        return self._guarded(lambda: self.impl.run_case(source, buffers, declared))

    def build_only(self, source: str) -> Outcome:
        return self._guarded(lambda: self.impl.build_only(source))

    def run_backprop(self, tape) -> Outcome:
        return self._guarded(lambda: self.impl.run_backprop(tape))


def checked_capabilities(declared) -> dict:
    """CAPABILITIES as SPEC.md, "The protocol", defines it, or LoadFailed saying what is
    wrong: a claim the suite cannot honour is a usage error, not a quiet pass."""
    if declared is None:
        return {**DEFAULT_CAPABILITIES, "ulp": {}}
    if not isinstance(declared, dict):
        raise LoadFailed(f"CAPABILITIES is {type(declared).__name__}, not a dict")
    unknown = set(declared) - set(DEFAULT_CAPABILITIES)
    if unknown:
        raise LoadFailed(f"CAPABILITIES has unknown keys {sorted(map(str, unknown))}; it "
                         f"may have {sorted(DEFAULT_CAPABILITIES)}")
    unsupported = declared.get("unsupported", [])
    if not isinstance(unsupported, list | tuple) or not all(
            isinstance(f, str) for f in unsupported):
        raise LoadFailed("CAPABILITIES['unsupported'] must be a list of op names (or op:dtype)")
    if set(unsupported) - FEATURES:
        raise LoadFailed(f"CAPABILITIES['unsupported'] names {sorted(set(unsupported) - FEATURES)}"
                         f", which are not features of the IR: {sorted(FEATURES)}")
    ulp = declared.get("ulp", {})
    if not isinstance(ulp, dict):
        raise LoadFailed("CAPABILITIES['ulp'] must be a dict of op -> ulps")
    for op, ulps in ulp.items():
        if op not in TRANSCENDENTAL:
            exact_ops = ", ".join(o for o in (*elementwise("f32", 2), *elementwise("f32", 1))
                                  if o not in TRANSCENDENTAL)
            raise LoadFailed(f"CAPABILITIES['ulp'] declares {op!r}: the spec makes {exact_ops} "
                             f"exact, so only {', '.join(sorted(TRANSCENDENTAL))} may declare "
                             "an error in ulps")
        if isinstance(ulps, bool) or not isinstance(ulps, int) or ulps < 0:
            raise LoadFailed(f"CAPABILITIES['ulp'][{op!r}] is {ulps!r}, not a whole number "
                             "of ulps")
    flags = {}
    for flag in ("bit_exact_gradients", "integer_division_traps", "float64_gradients",
                 "messages"):
        flags[flag] = declared.get(flag, DEFAULT_CAPABILITIES[flag])
        if not isinstance(flags[flag], bool):
            raise LoadFailed(f"CAPABILITIES[{flag!r}] must be True or False")
    if flags["float64_gradients"] and flags["bit_exact_gradients"]:
        raise LoadFailed("CAPABILITIES claims bit-exact gradients computed in float64: "
                         "gradients rounded from float64 are not the spec's f32 bits; "
                         "declare 'bit_exact_gradients': False")
    rejection = declared.get("rejection", [])
    if not isinstance(rejection, list | tuple) or not all(
            isinstance(n, str) and n in calling.CRASHES for n in rejection):
        raise LoadFailed("CAPABILITIES['rejection'] must be a list of the error classes "
                         f"an implementation may raise from build on purpose, of "
                         f"{sorted(calling.CRASHES)}")
    environment = declared.get("environment", [])
    if not isinstance(environment, list | tuple) or len(environment) > 64 or not all(
            isinstance(n, str) and len(n) <= 128 and ENVIRONMENT_NAME.fullmatch(n)
            for n in environment):
        raise LoadFailed("CAPABILITIES['environment'] must be a list of at most 64 "
                         "environment variable names")
    return {"unsupported": list(unsupported), "ulp": dict(ulp), **flags,
            "environment": list(environment), "rejection": list(rejection)}


def load(spec: str, *, timeout: float = DEFAULT_TIMEOUT, load_timeout: float = LOAD_TIMEOUT,
         in_process: bool = False, base: str | None = None,
         confinement: Confinement | None = None) -> Implementation:
    """What --impl names, started and asked what it is; LoadFailed if it cannot be.
    `base`: the directory relative names and paths are looked up from (the current one).
    `confinement`: how its process is held in (docs/isolation.md, "Isolation"); by default a safe
    share of the machine's memory, and a sandbox where bubblewrap is installed. An `auto`
    sandbox is decided here, in the process that calls this first; a confinement already
    decided (`resolved`) is taken as it is, never decided again."""
    base = str(pathlib.Path(base or os.getcwd()).resolve())
    if confinement is None:
        confinement = Confinement(default_memory_limit())
    if not confinement.decided:
        try:
            confinement = confinement.resolved()
        except ValueError as problem:
            raise LoadFailed(str(problem)) from None
    transport: Transport
    if spec.startswith("cmd:"):
        command = Command(_command_argv(spec[4:], base), timeout=timeout, cwd=base,
                          confinement=confinement)
        transport = command
        said = command.probe(load_timeout)
        default = spec[4:].strip()
        said.setdefault("functions", list(FUNCTIONS))  # a server that says nothing offers both
    elif in_process or spec == "reference":
        # The reference is the suite's own oracle: trusted, and called directly.
        module = calling.load_module(spec, base)
        transport, said = InProcess(module, timeout), describe_module(module)
        default = pathlib.Path(spec).stem if spec.endswith(".py") else spec
    else:
        worker = Worker(spec, base, timeout, load_timeout, confinement)
        transport, said = worker, worker.start()
        default = pathlib.Path(spec).stem if spec.endswith(".py") else spec
    try:
        impl = _defines_something(Implementation(
            spec, transport, name=one_line(str(said.get("name") or default), TEXT_LIMIT),
            confinement=None if isinstance(transport, InProcess) else confinement,
            version=one_line(str(said.get("version") or ""), TEXT_LIMIT),
            capabilities=said.get("capabilities"),
            functions=_functions(said.get("functions"))))
        # The environment is the user's to give: a name the implementation asks for is
        # passed only where the user passed it (--pass-env), never on its word alone.
        required = impl.capabilities["environment"]
        from gradient_conformance.conformance.transports.confinement import KEPT
        unpassed = [name for name in required if name not in confinement.pass_env and
                    name not in KEPT]
        if unpassed and impl.confinement is not None:
            raise LoadFailed(
                f"{impl.label} asks for the environment variable"
                f"{'s' if len(unpassed) > 1 else ''} {', '.join(unpassed)} (CAPABILITIES"
                "['environment']): the suite passes on only what you name; to give "
                f"{'them' if len(unpassed) > 1 else 'it'}, add "
                + " ".join(f"--pass-env={name}" for name in unpassed))
        missing = [name for name in required if name not in os.environ]
        if missing:
            raise LoadFailed(f"{impl.label} requires the environment variable"
                             f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}, not "
                             "set here: set it, and pass it on with --pass-env (CAPABILITIES"
                             "['environment'])")
    except LoadFailed:
        transport.close()
        raise
    return impl


def _functions(said) -> tuple[str, ...]:
    """The protocol functions an implementation says it defines (SPEC.md, "The protocol")."""
    if not isinstance(said, list) or not set(said) <= set(FUNCTIONS):
        raise LoadFailed(f"the implementation says it offers {said!r}: \"functions\" must be "
                         "a list of \"build\" and \"backprop\"")
    return tuple(f for f in FUNCTIONS if f in said)


def _defines_something(impl: Implementation) -> Implementation:
    if not impl.functions:
        raise LoadFailed(f"{impl.spec} defines neither build(source) nor backprop(tape): it "
                         "is not an implementation (SPEC.md, \"The protocol\")")
    return impl


def _command_argv(text: str, base: str) -> list[str]:
    """The program of a cmd: spec, found as a shell would; LoadFailed if there is none."""
    try:
        argv = shlex.split(text)
    except ValueError as problem:
        raise LoadFailed(f"cmd:{text}: {problem}") from None
    if not argv:
        raise LoadFailed("cmd: names no program: --impl=cmd:'PROGRAM ARGS'")
    program = argv[0]
    found = str(pathlib.Path(base, program)) if os.sep in program else shutil.which(program)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise LoadFailed(f"cmd:{text}: {program!r} is not a program that can be started "
                         "(no executable file of that name)")
    return [found, *argv[1:]]
