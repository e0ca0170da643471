"""A process the suite started for the implementation under test, and the pipes to it, with
a deadline on every read and write. SPEC.md, "Isolation".

The suite never trusts what runs there. Every wait has a deadline; every read is bounded;
the process's own output (its stdout where that is not the channel, and its stderr) is
drained while the suite waits, into a bounded tail, so a flood costs neither memory nor disk.
`kill()` ends the process's whole session, and every process that still carries the token
in its environment, so a server that daemonizes leaves nothing running.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import pathlib
import secrets
import select
import signal
import subprocess
import sys
import time
import weakref

TAIL_BYTES = 16_000  # of the process's own output, kept for the report
TOKEN_VARIABLE = "GRADIENT_CONFORMANCE_CHILD"


class ChildFailed(Exception):
    """The process misbehaved. `reason`: timeout, crash, junk or protocol; `detail` says how."""

    def __init__(self, reason: str, detail: str):
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}")


class Child:
    """One started process: its channel (stdin and stdout, or two other pipes), and its
    output tail. Not thread-safe."""

    def __init__(self, argv: list[str], *, cwd: str | None = None, env: dict | None = None):
        self.token = secrets.token_hex(8)
        environment = dict(os.environ if env is None else env)
        environment[TOKEN_VARIABLE] = self.token
        output_read, output_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=output_write,
                cwd=cwd, env=environment, start_new_session=True, bufsize=0,
                preexec_fn=_die_with_parent)
        finally:
            os.close(output_write)
        assert self.process.stdin is not None and self.process.stdout is not None  # PIPEs
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        self._output = output_read
        for fd in (self._in, self._out, self._output):
            os.set_blocking(fd, False)
        # A child nobody holds any more is ended with its session, not left idle.
        self._finalizer = weakref.finalize(self, _end_session, self.process, output_read)
        self._output_open = True
        self._buffer = bytearray()  # read from the channel, not yet taken
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_size = 0
        self.output_bytes = 0  # all the process wrote besides the channel

    # --- the channel -------------------------------------------------------------------

    def send(self, data: bytes, deadline: float) -> None:
        """Write all of `data`, or fail: a process that stops reading is a timeout."""
        view = memoryview(data)
        while view:
            self._wait(write=True, deadline=deadline, what="to read its request")
            try:
                written = os.write(self._in, view[:1 << 16])
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                raise ChildFailed("crash", self._ended("before it read its request")) from None
            view = view[written:]

    def receive_line(self, limit: int, deadline: float) -> bytes:
        """One line (without its newline), at most `limit` bytes long."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                return line
            if len(self._buffer) > limit:
                raise ChildFailed("junk", f"a reply line longer than {limit} bytes")
            self._fill(deadline, "to reply")

    def receive_exactly(self, size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            self._fill(deadline, "to reply")
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _fill(self, deadline: float, what: str) -> None:
        self._wait(write=False, deadline=deadline, what=what)
        try:
            chunk = os.read(self._out, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            raise ChildFailed("crash", self._ended("before it replied"))
        self._buffer += chunk

    def _wait(self, *, write: bool, deadline: float, what: str) -> None:
        """Until the channel is ready, draining the process's output meanwhile."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChildFailed("timeout", f"it took longer than the deadline {what}")
            channel = self._in if write else self._out
            watched = [self._output] if self._output_open else []
            readable, writable, _ = select.select(
                watched + ([] if write else [channel]), [channel] if write else [], [],
                remaining)
            if self._output in readable:
                self._drain()
            if (writable if write else [fd for fd in readable if fd == channel]):
                return

    def _drain(self) -> None:
        if not self._output_open:
            return
        with contextlib.suppress(BlockingIOError, OSError):
            chunk = os.read(self._output, 1 << 16)
            self._output_open = bool(chunk)  # closed: select would call it ready for ever
            self.output_bytes += len(chunk)
            self._tail.append(chunk)
            self._tail_size += len(chunk)
            while self._tail_size - len(self._tail[0]) >= TAIL_BYTES:
                self._tail_size -= len(self._tail.popleft())

    def output(self) -> str:
        """The tail of what the process wrote besides the channel, as text."""
        for _ in range(256):  # what is there now, but not a flood for ever
            before = self.output_bytes
            self._drain()
            if self.output_bytes == before:
                break
        data = b"".join(self._tail)[-TAIL_BYTES:]
        text = data.decode("utf-8", "replace")
        dropped = self.output_bytes - len(data)
        return (f"[{dropped} earlier bytes not kept]\n" if dropped > 0 else "") + text

    def _ended(self, when: str) -> str:
        try:
            status = self.process.wait(timeout=0.2)  # it may be exiting: a moment to see
        except subprocess.TimeoutExpired:
            return f"it closed its output {when}, and is still running"
        if status < 0:
            name = signal.Signals(-status).name if -status in signal.valid_signals() else ""
            return f"it was killed by signal {-status} {name} {when}".replace("  ", " ")
        return f"it exited with status {status} {when}"

    # --- the end -----------------------------------------------------------------------

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """End the session and everything that still carries this child's token."""
        self._finalizer()
        for pid in _carrying(self.token):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _end_session(process: subprocess.Popen, output: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with contextlib.suppress(OSError):
        os.close(output)


def _die_with_parent() -> None:
    """In the child, before it runs: be killed when the suite's process ends, even by
    SIGKILL, so that a killed suite leaves no implementation running (Linux's
    PR_SET_PDEATHSIG; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _carrying(token: str) -> list[int]:
    """The processes whose environment holds the token (Linux's /proc; elsewhere none)."""
    found: list[int] = []
    needle = f"{TOKEN_VARIABLE}={token}".encode()
    proc = pathlib.Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found
