"""`--impl=cmd:'PROGRAM ARGS'`: an implementation in any language, over JSON lines.
SPEC.md, "The protocol".

`CommandImplementation(argv)` looks like a Python implementation (`build(source)` returning
`run(buffers)`), and stands between the suite and a process it does not trust. A process that
crashes, hangs past the timeout, or writes anything but a reply is an `ImplementationFailure`
with its reason and the tail of its stderr, and is started again for the next request. A
rejection at build raises `BuildRejected`; a run failure raises `RunFailed`. The suite itself
never hangs and never crashes on what the process does.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading

import numpy as np

from reference.serve import decode_buffer, encode_buffer, encode_tape

DEFAULT_TIMEOUT = 20.0  # seconds per request; the suite passes its own per-case timeout
STDERR_TAIL = 4000


class ImplementationFailure(Exception):
    """The process misbehaved: `reason` is crash, timeout, junk or mismatch."""

    def __init__(self, reason: str, detail: str, stderr: str = ""):
        self.reason, self.detail, self.stderr = reason, detail, stderr
        super().__init__(f"{reason}: {detail}" + (f"\nstderr:\n{stderr}" if stderr else ""))


class BuildRejected(Exception):
    """The implementation rejected the program at build (its message is the argument)."""


class RunFailed(Exception):
    """The run failed; `kind` is "index" when the implementation says an index was out of
    range, else whatever it said (or "run")."""

    def __init__(self, message: str, kind: str = "run"):
        self.kind = kind
        super().__init__(message)


class CommandImplementation:
    """A long-lived process that speaks the protocol. Not thread-safe."""

    def __init__(self, argv: list[str], *, timeout: float = DEFAULT_TIMEOUT, cwd=None):
        self.argv, self.timeout, self.cwd = list(argv), timeout, cwd
        self.name = " ".join(self.argv)
        self._process: subprocess.Popen | None = None
        self._replies: queue.Queue = queue.Queue()
        self._stderr = None
        self._next_id = 0
        self._generation = 0  # bumped at each start: build ids of old processes are void

    # --- the protocol --------------------------------------------------------------------

    def build(self, source: str):
        """Send the program; return `run(buffers)`, or raise BuildRejected."""
        build_id, generation = self._build(source)
        handle = {"id": build_id, "generation": generation}

        def run(buffers: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
            if handle["generation"] != self._generation:  # the process was restarted
                handle["id"], handle["generation"] = self._build(source)
            request = {"run": handle["id"],
                       "buffers": {str(k): encode_buffer(v) for k, v in buffers.items()}}
            reply = self._request(request)
            if not reply.get("ok"):
                raise RunFailed(str(reply.get("error", "")), str(reply.get("kind", "run")))
            try:
                return {int(k): decode_buffer(v) for k, v in reply["buffers"].items()}
            except (KeyError, TypeError, ValueError, AttributeError) as problem:
                raise self._fail("junk", f"a run reply with malformed buffers ({problem})") \
                    from None

        return run

    def backprop(self, tape) -> list[int]:
        """Send a tape; return its derivatives as f32 bit patterns, or raise BuildRejected
        (the tape was rejected)."""
        reply = self._request({"backprop": encode_tape(tape)})
        if not reply.get("ok"):
            raise BuildRejected(str(reply.get("error", "")))
        derivatives = reply.get("derivatives")
        if not isinstance(derivatives, list) or not all(
                isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 2**32
                for b in derivatives):
            raise self._fail("junk", f"a backprop reply without a list of bit patterns: "
                             f"{str(derivatives)[:200]}")
        return derivatives

    def _build(self, source: str) -> tuple[int, int]:
        reply = self._request({"build": source})
        if not reply.get("ok"):
            raise BuildRejected(str(reply.get("error", "")))
        return reply["id"], self._generation

    @property
    def restarts(self) -> int:
        """How many times the process had to be started again."""
        return max(self._generation - 1, 0)

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    # --- the process ---------------------------------------------------------------------

    def _start(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            cwd=self.cwd, text=True, bufsize=1, env=os.environ.copy())
        self._replies = queue.Queue()
        self._generation += 1
        threading.Thread(target=_pump, args=(self._process.stdout, self._replies),
                         daemon=True).start()

    def _request(self, body: dict) -> dict:
        if self._process is None or self._process.poll() is not None:
            self._start()
        self._next_id += 1
        request_id = self._next_id
        try:
            self._process.stdin.write(json.dumps({"id": request_id, **body}) + "\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as problem:
            raise self._fail("crash", f"could not write the request ({problem})") from None
        try:
            line = self._replies.get(timeout=self.timeout)
        except queue.Empty:
            raise self._fail("timeout", f"no reply within {self.timeout:g} s") from None
        if line is None:
            raise self._fail("crash", f"the process ended (exit status {self._process.wait()})")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise self._fail("junk", f"not a JSON reply: {line[:200]!r}") from None
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            raise self._fail("mismatch", f"a reply to request {request_id} expected, got "
                             f"{line[:200]!r}")
        return reply

    def _fail(self, reason: str, detail: str) -> ImplementationFailure:
        """Kill the process, keep the tail of its stderr, and describe what went wrong."""
        stderr = ""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._stderr.seek(0)
            stderr = self._stderr.read().decode("utf-8", "replace")[-STDERR_TAIL:]
            self._process = None
        return ImplementationFailure(reason, detail, stderr)


def _pump(stream, replies: queue.Queue) -> None:
    """Move the process's stdout lines to a queue; None when it ends."""
    for line in stream:
        replies.put(line)
    replies.put(None)
