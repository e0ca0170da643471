"""The implementation under test, as the checks see it: `load(spec)` and the `Outcome` of
each case. SPEC.md, "The protocol", "Isolation" and "Statuses".

`load` takes what `--impl` takes: `reference`, a module name, a path to a `.py` file, or
`cmd:PROGRAM ARGS`. A Python module runs in a worker process of its own (`Worker`), restarted
after any crash or timeout; `cmd:` programs speak JSON lines (conformance/protocol.py); and
`in_process=True` calls the module in the suite's own process, unprotected, for debugging.
Whatever the implementation does (raise, hang, crash, flood its output, return junk) comes
back as an `Outcome`; nothing it does escapes into the suite.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pathlib
import shlex
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from gradient_conformance.conformance import calling, worker
from gradient_conformance.conformance.process import Child, ChildFailed
from gradient_conformance.reports.records import visible

DEFAULT_TIMEOUT = 20.0
# Importing a framework (PyTorch, TensorFlow) can take far longer than one case.
LOAD_TIMEOUT = 120.0
DEFAULT_CAPABILITIES = {"unsupported": [], "ulp": {}, "bit_exact_gradients": True}
# The ops SPEC.md makes exact: only exp2, log2 and sin may declare an error in ulps.
MAY_DECLARE_ULPS = ("exp2", "log2", "sin")
FEATURES = frozenset({
    "add", "mul", "max", "recip", "exp2", "log2", "sqrt", "sin", "idiv", "mod", "and", "or",
    "xor", "shl", "shr", "cmplt", "cmpne", "where", "cast", "bitcast", "reduce", "reduce_mul",
    "expand", "reshape", "detach", "gradient", "load", "store", "range", "call",
    "higher_order"})


# The implementation could not be started: a usage error, before any check runs.
LoadFailed = calling.LoadFailed


class Abandoned(BaseException):
    """Raised into a check that already saw the implementation time out, or restarted it
    RESTARTS_PER_CHECK times. It is no Exception, so Hypothesis lets it through instead of
    shrinking on: a hanging implementation costs one timeout per check (the case that hung
    is the one reported), and a crashing one a bounded number of restarts."""


RESTARTS_PER_CHECK = 10


@dataclass
class Outcome:
    """What one case did. `status`: ok (with `buffers` or a tape's `derivatives` as f32
    bits), rejected (a deliberate answer at build), run-error (`index`: it blamed an index)
    or failure (`reason`: timeout, crash, resource, junk or protocol)."""

    status: str
    buffers: dict[int, np.ndarray] = field(default_factory=dict)
    message: str = ""
    index: bool = False
    derivatives: list[int] = field(default_factory=list)
    reason: str = ""


def _outcome(answer_status: str, message: str = "", reason: str = "", index: bool = False,
             **values) -> Outcome:
    """An Outcome whose words came from the implementation: made safe to show and store."""
    return Outcome(answer_status, message=visible(calling.bounded(message)), reason=reason,
                   index=index, **values)


class Implementation:
    """The checks' view of an implementation. `transport` does the calling: `InProcess`,
    `Worker` or `protocol.Command`."""

    def __init__(self, spec: str, transport, *, name: str, version: str, capabilities,
                 functions: tuple[str, ...]):
        self.spec, self.transport, self.functions = spec, transport, functions
        self.name, self.version = visible(name), visible(version)
        self.capabilities = checked_capabilities(capabilities)
        self.begin_check()

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}".strip()

    @property
    def restarts(self) -> int:
        return getattr(self.transport, "restarts", 0)

    def provides(self, function: str) -> bool:
        return function in self.functions

    def unsupported(self) -> set[str]:
        return set(self.capabilities["unsupported"])

    def ulps(self, op: str) -> int:
        return int(self.capabilities["ulp"].get(op, 0))

    def begin_check(self) -> None:
        self.abandon, self.restarts_before = "", self.restarts

    def _guarded(self, outcome_of) -> Outcome:
        if self.abandon:
            raise Abandoned(self.abandon)
        outcome = outcome_of()
        if outcome.reason == "timeout":
            self.abandon = ("the implementation timed out in this check, so the suite "
                            "stopped shrinking: the case reported is the one that hung")
        elif self.restarts - self.restarts_before >= RESTARTS_PER_CHECK:
            self.abandon = (f"the implementation had to be started again "
                            f"{RESTARTS_PER_CHECK} times in this check, so the suite stopped "
                            "shrinking: the case reported is the smallest failing one so far")
        return outcome

    def run_case(self, source: str, buffers: dict[int, np.ndarray],
                 declared: dict[int, tuple[str, tuple]]) -> Outcome:
        """Build and run; the outputs are the declared slots, of the declared dtypes and
        shapes, or the outcome is a failure."""
        return self._guarded(lambda: self.transport.case(source, buffers, declared))

    def build_only(self, source: str) -> Outcome:
        return self._guarded(lambda: self.transport.case(source, None, {}))

    def run_backprop(self, tape) -> Outcome:
        return self._guarded(lambda: self.transport.backprop(tape))

    def build(self, source: str):
        """The implementation's own run callable, unguarded: for benchmarks, which want
        nothing between the clock and the implementation (in-process and cmd: only)."""
        return self.transport.build(source)

    def close(self) -> None:
        self.transport.close()


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
        raise LoadFailed("CAPABILITIES['unsupported'] must be a list of op names")
    if set(unsupported) - FEATURES:
        raise LoadFailed(f"CAPABILITIES['unsupported'] names {sorted(set(unsupported) - FEATURES)}"
                         f", which are not features of the IR: {sorted(FEATURES)}")
    ulp = declared.get("ulp", {})
    if not isinstance(ulp, dict):
        raise LoadFailed("CAPABILITIES['ulp'] must be a dict of op -> ulps")
    for op, ulps in ulp.items():
        if op not in MAY_DECLARE_ULPS:
            raise LoadFailed(f"CAPABILITIES['ulp'] declares {op!r}: the spec makes add, mul, "
                             f"max, recip and sqrt exact, so only {', '.join(MAY_DECLARE_ULPS)} "
                             "may declare an error in ulps")
        if isinstance(ulps, bool) or not isinstance(ulps, int) or ulps < 0:
            raise LoadFailed(f"CAPABILITIES['ulp'][{op!r}] is {ulps!r}, not a whole number "
                             "of ulps")
    exact = declared.get("bit_exact_gradients", True)
    if not isinstance(exact, bool):
        raise LoadFailed("CAPABILITIES['bit_exact_gradients'] must be True or False")
    return {"unsupported": list(unsupported), "ulp": dict(ulp), "bit_exact_gradients": exact}


# --- the transports ------------------------------------------------------------------------


def _derivatives(floats: list[float], entries: int) -> Outcome:
    """A tape's derivatives as f32 bits, or a failure: one number per entry, each an f32."""
    if len(floats) != entries:
        return _outcome("failure", f"backprop returned {len(floats)} derivatives for "
                        f"{entries} entries", "junk")
    bits = []
    for k, value in enumerate(floats):
        single = np.float32(value)
        if not (float(single) == value or (math.isnan(value) and np.isnan(single))):
            return _outcome("failure", f"derivative {k} is {value!r}, which is not an f32 "
                            "value: computed in another precision?", "junk")
        bits.append(int(single.view(np.uint32)))
    return Outcome("ok", derivatives=bits)


def _from_answer(answer: calling.Answer) -> Outcome:
    if answer.status == "ok":
        return Outcome("ok", buffers=answer.value if isinstance(answer.value, dict) else {})
    return _outcome(answer.status, answer.message, answer.reason, answer.index)


class InProcess:
    """The module called in the suite's own process, with SIGALRM as the deadline. Nothing
    protects the suite from it: for debugging (--conformance-in-process), for the trusted
    reference, and for benchmarks."""

    restarts = 0

    def __init__(self, module, timeout: float):
        self.module, self.timeout = module, timeout

    def case(self, source, buffers, declared) -> Outcome:
        with _alarm(self.timeout) as expired:
            answer = calling.call_build(self.module, source)
            if answer.status == "ok" and buffers is not None:
                answer = calling.call_run(answer.value, buffers, declared)
        if expired():
            return _outcome("failure", f"no answer within {self.timeout:g} s", "timeout")
        return _from_answer(answer)

    def backprop(self, tape) -> Outcome:
        with _alarm(self.timeout) as expired:
            answer = calling.call_backprop(self.module, tape)
        if expired():
            return _outcome("failure", f"no answer within {self.timeout:g} s", "timeout")
        if answer.status != "ok":
            return _from_answer(answer)
        return _derivatives(answer.value, len(tape) if isinstance(tape, list) else 0)

    def build(self, source: str):
        return self.module.build(source)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def _alarm(seconds: float):
    """Interrupt the block after `seconds` (the main thread's SIGALRM): `expired()` says
    whether it was. The interruption is calling.Deadline, which calling never takes for the
    implementation's own answer."""
    fired = []
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield lambda: False
        return

    def expire(signum, frame):
        fired.append(True)
        raise calling.Deadline

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield lambda: bool(fired)
    except calling.Deadline:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Worker:
    """A Python module in a worker process (conformance/worker.py), started at the first
    request and again after any failure that killed it. Every request has a deadline; on a
    timeout, a crash or a reply that breaks the protocol, the worker's whole session is
    killed."""

    def __init__(self, spec: str, base: str, timeout: float, load_timeout: float = LOAD_TIMEOUT):
        self.spec, self.base, self.timeout, self.load_timeout = spec, base, timeout, load_timeout
        self.child: Child | None = None
        self.started = 0
        self.hello: dict = {}

    @property
    def restarts(self) -> int:
        return max(self.started - 1, 0)

    def start(self) -> dict:
        """Start the worker and load the module: what it said of itself, or LoadFailed."""
        self.child = Child([sys.executable, "-m", "gradient_conformance.conformance.worker"],
                           cwd=self.base)
        self.started += 1
        request = {"op": "hello", "spec": self.spec, "base": self.base,
                   "path": [p for p in sys.path if p]}
        try:
            reply, _ = self._exchange(request, b"", self.load_timeout, payload_limit=0)
        except ChildFailed as problem:
            output = self.child.output().strip()
            self.stop()
            raise LoadFailed(f"the worker could not load it: {problem}"
                             + (f"\nits output:\n{output}" if output else "")) from None
        if not reply.get("ok"):
            self.stop()
            raise LoadFailed(str(reply.get("error", "")))
        self.hello = reply
        return reply

    def stop(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child = None

    close = stop

    def _exchange(self, header: dict, payload: bytes, seconds: float, *,
                  payload_limit: int) -> tuple[dict, bytes]:
        deadline = time.monotonic() + seconds
        self.child.send(worker.frame(header, payload), deadline)
        sizes = self.child.receive_exactly(worker.FRAME.size, deadline)
        header_size, payload_size = worker.FRAME.unpack(sizes)
        if header_size > 1 << 20 or payload_size > payload_limit:
            raise ChildFailed("protocol", f"a reply of {header_size} + {payload_size} bytes, "
                              f"more than the request allows")
        try:
            reply = json.loads(self.child.receive_exactly(header_size, deadline))
        except (UnicodeDecodeError, json.JSONDecodeError) as problem:
            raise ChildFailed("protocol", f"a reply header that is not JSON: {problem}") \
                from None
        if not isinstance(reply, dict):
            raise ChildFailed("protocol", "a reply header that is not an object")
        return reply, self.child.receive_exactly(payload_size, deadline)

    def _request(self, header: dict, payload: bytes, payload_limit: int):
        """(reply, payload), or the Outcome of a failure (the worker then killed)."""
        if self.child is None or not self.child.alive():
            if self.child is not None:
                self.stop()
            try:
                self.start()
            except LoadFailed as problem:
                return _outcome("failure", f"the implementation could not be started again: "
                                f"{problem}", "crash")
        try:
            return self._exchange(header, payload, self.timeout, payload_limit=payload_limit)
        except ChildFailed as problem:
            output = self.child.output().strip()
            self.stop()
            return _outcome("failure", f"{problem}" + (f"\nits output:\n{output}" if output
                                                      else ""), problem.reason)

    def case(self, source, buffers, declared) -> Outcome:
        listed, payload = worker.pack(buffers or {})
        header = {"op": "case", "source": source, "run": buffers is not None,
                  "buffers": listed,
                  "declared": [[s, d, list(shape)] for s, (d, shape) in sorted(declared.items())]}
        expected = {slot: (calling.DTYPE_STRINGS[d], tuple(shape))
                    for slot, (d, shape) in declared.items()}
        limit = sum(np.dtype(d).itemsize * math.prod(shape) for d, shape in expected.values())
        got = self._request(header, payload, limit)
        if isinstance(got, Outcome):
            return got
        reply, data = got
        status = reply.get("status")
        if status not in ("ok", "rejected", "run-error", "failure"):
            self.stop()
            return _outcome("failure", f"a reply with status {str(status)[:40]!r}", "protocol")
        if status != "ok":
            return _outcome(status, str(reply.get("message", "")), str(reply.get("reason", "")),
                            bool(reply.get("index")))
        if buffers is None:
            return Outcome("ok")
        return self._outputs(reply.get("outputs"), data, expected)

    def _outputs(self, listed, data: bytes, expected) -> Outcome:
        """The reply's arrays, read with the suite's numpy, exactly as declared."""
        try:
            slots = {int(slot): (str(dtype), tuple(int(n) for n in shape))
                     for slot, dtype, shape in listed}
        except (TypeError, ValueError):
            slots = None
        if slots != expected:
            self.stop()
            return _outcome("failure", "a reply whose outputs are not the declared slots",
                            "protocol")
        buffers, offset = {}, 0
        for slot, (dtype, shape) in sorted(expected.items()):
            count = math.prod(shape)
            buffers[slot] = np.frombuffer(data, dtype=dtype, count=count,
                                          offset=offset).reshape(shape).copy()
            offset += buffers[slot].nbytes
        if offset != len(data):
            self.stop()
            return _outcome("failure", "a reply whose payload does not match its outputs",
                            "protocol")
        return Outcome("ok", buffers=buffers)

    def backprop(self, tape) -> Outcome:
        entries = len(tape) if isinstance(tape, list) else 0
        try:
            header = {"op": "backprop", "tape": json.loads(json.dumps(tape))}
        except (TypeError, ValueError):
            header = {"op": "backprop", "tape": repr(tape)}
        got = self._request(header, b"", 8 * entries)
        if isinstance(got, Outcome):
            return got
        reply, data = got
        status = reply.get("status")
        if status == "ok":
            if len(data) % 8:
                self.stop()
                return _outcome("failure", "a backprop reply of a broken length", "protocol")
            return _derivatives(np.frombuffer(data, "<f8").tolist(), entries)
        if status in ("rejected", "failure"):
            return _outcome(status, str(reply.get("message", "")), str(reply.get("reason", "")))
        self.stop()
        return _outcome("failure", f"a reply with status {str(status)[:40]!r}", "protocol")

    def build(self, source: str):
        raise NotImplementedError("benchmarks call a Python module in process")


def load(spec: str, *, timeout: float = DEFAULT_TIMEOUT, load_timeout: float = LOAD_TIMEOUT,
         in_process: bool = False, base: str | None = None) -> Implementation:
    """What --impl names, started and asked what it is; LoadFailed if it cannot be.
    `base`: the directory relative names and paths are looked up from (the current one)."""
    base = str(pathlib.Path(base or os.getcwd()).resolve())
    if spec.startswith("cmd:"):
        from gradient_conformance.conformance.protocol import Command
        argv = _command_argv(spec[4:], base)
        command = Command(argv, timeout=timeout, cwd=base)
        said = command.probe(load_timeout)
        try:
            return Implementation(
                spec, command, name=str(said.get("name") or spec[4:].strip()),
                version=str(said.get("version") or ""), capabilities=said.get("capabilities"),
                functions=_functions(said.get("functions", ["build", "backprop"])))
        except LoadFailed:
            command.close()
            raise
    if in_process or spec == "reference":
        # The reference is the suite's own oracle: trusted, and called directly.
        module = calling.load_module(spec, base)
        default = pathlib.Path(spec).stem if spec.endswith(".py") else spec
        return Implementation(
            spec, InProcess(module, timeout), name=str(getattr(module, "NAME", "") or default),
            version=str(getattr(module, "VERSION", "") or ""),
            capabilities=getattr(module, "CAPABILITIES", None),
            functions=tuple(f for f in ("build", "backprop")
                            if callable(getattr(module, f, None))))
    transport = Worker(spec, base, timeout, load_timeout)
    hello = transport.start()
    default = pathlib.Path(spec).stem if spec.endswith(".py") else spec
    try:
        return _defines_something(Implementation(
            spec, transport, name=hello.get("name") or default, version=hello.get("version", ""),
            capabilities=hello.get("capabilities"), functions=tuple(hello.get("functions", ()))))
    except LoadFailed:
        transport.stop()
        raise


def _functions(said) -> tuple[str, ...]:
    """The functions a server says it offers (SPEC.md, "The protocol"), at least one; both
    if it says nothing."""
    if not isinstance(said, list) or not set(said) <= {"build", "backprop"} or not said:
        raise LoadFailed(f"the server says it offers {said!r}: \"functions\" must be a list "
                         "of \"build\" and \"backprop\"")
    return tuple(f for f in ("build", "backprop") if f in said)


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
