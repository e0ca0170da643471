"""The unprotected transport: the module called in the suite's own process. docs/isolation.md,
"Isolation"."""

from __future__ import annotations

import contextlib
import signal
from typing import cast

from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.conformance.transports import calling
from gradient_conformance.conformance.transports.answers import answered, derivatives, from_answer


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
            return answered("failure", f"no answer within {self.timeout:g} s", "timeout")
        return from_answer(answer)

    def backprop(self, tape) -> Outcome:
        with _alarm(self.timeout) as expired:
            answer = calling.call_backprop(self.module, tape)
        if expired():
            return answered("failure", f"no answer within {self.timeout:g} s", "timeout")
        if answer.status != "ok":
            return from_answer(answer)
        return derivatives(cast(list, answer.value),  # an ok backprop's (calling.py)
                           len(tape) if isinstance(tape, list) else 0)

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
