"""A process the suite started for the implementation under test, and the pipes to it, with
a deadline on every read and write. docs/isolation.md, "Isolation".

The suite never trusts what runs there. Every wait has a deadline; every read is bounded;
the process's own output (its stdout where that is not the channel, and its stderr) is
drained while the suite waits, into a bounded tail, so a flood costs neither memory nor disk.
`kill()` ends the process's whole session, and every process that still carries the token
in its environment, so a server that daemonizes leaves nothing running.
"""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import ctypes
import functools
import math
import os
import pathlib
import secrets
import select
import signal
import subprocess
import sys
import time
import weakref

from gradient_conformance.conformance.transports.confinement import (
    Confinement,
    Ended,
    become_subreaper,
    descendants,
    filter_descriptor,
    kill_all,
    private_folder,
    processes,
    reap,
    remove_folder,
    strays,
)

TAIL_BYTES = 16_000  # of the process's own output, kept for the report
TOKEN_VARIABLE = "GRADIENT_CONFORMANCE_CHILD"
SWEEP_SECONDS = 0.5  # a look through /proc costs about 2 ms: not after every case
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# The processes this process started for implementations and has not ended. The children
# of a process are the whole process's, so what it started must be known process-wide, or
# one child's sweep would take another child for a stray.
STARTED: set[int] = set()


def _meaning(name: str) -> str:
    """What a signal that killed it means, where that is one thing."""
    if name == "SIGFPE":  # what raises it on Linux, unless floating-point traps are enabled
        return "; SIGFPE is an arithmetic trap, as an integer division by zero or of -2^31 by -1"
    return ""


class ChildFailed(Exception):
    """The process misbehaved. `reason`: timeout, crash, junk or protocol; `detail` says how."""

    def __init__(self, reason: str, detail: str):
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}")


class Child:
    """One started process: its channel (stdin and stdout, or two other pipes), and its
    output tail. Not thread-safe."""

    def __init__(self, argv: list[str], *, cwd: str | None = None, env: dict | None = None,
                 confinement: Confinement | None = None, own_folder: bool = False,
                 reach: collections.abc.Sequence[str] = (),
                 own: collections.abc.Sequence[str] = ()):
        """`confinement`: the limits, environment and sandbox it starts under (docs/isolation.md,
        "Isolation"); with `own_folder`, its working folder is its private one, not `cwd`;
        `reach`: what it reads in a sandbox besides the system (its interpreter); `own`: the
        implementation's own files."""
        self.token = secrets.token_hex(8)
        self.confinement = confinement
        self.sandboxed = confinement is not None and confinement.sandbox == "bwrap"
        self.folder = private_folder() if confinement is not None else None
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        output_read, output_write = os.pipe()
        theirs = (request_read, reply_write, output_write)
        filtering = filter_descriptor() if self.sandboxed else None
        passed = (*theirs[:2], *([filtering] if filtering is not None else []))
        self.cgroup = None
        if confinement is not None and self.folder is not None:
            environment = confinement.environment(self.folder)
            cwd = self.folder if own_folder else (cwd or os.getcwd())
            argv = confinement.command(argv, self.folder, cwd, channel=theirs[:2],
                                       reach=reach, own=own, filtering=filtering)
            become_subreaper()
        else:
            environment = dict(os.environ if env is None else env)
        environment[TOKEN_VARIABLE] = self.token
        # In a sandbox the channel goes in as two other descriptors, moved to stdin and
        # stdout inside: bubblewrap's own process keeps its stdout open, and the suite must
        # see the implementation's close of its output as it happens.
        stdin, stdout = (subprocess.DEVNULL, subprocess.DEVNULL) if self.sandboxed else \
            theirs[:2]
        try:
            if confinement is not None:
                self.cgroup = confinement.cgroup(f"gradient-conformance-{os.getpid()}-"
                                                 f"{self.token}")
            self.process = subprocess.Popen(
                argv, stdin=stdin, stdout=stdout, stderr=output_write,
                cwd=self.folder if self.sandboxed else cwd,
                env=environment, start_new_session=True, bufsize=0,
                pass_fds=passed if self.sandboxed else (),
                preexec_fn=functools.partial(_before_exec, confinement, self.cgroup,
                                             confinement.tasks() if confinement else None))
        except BaseException:
            remove_folder(self.folder or "")
            if self.cgroup is not None:
                self.cgroup.remove()
            for fd in (request_write, reply_read, output_read):
                os.close(fd)
            raise
        finally:
            for fd in (*theirs, *([filtering] if filtering is not None else [])):
                os.close(fd)
        STARTED.add(self.process.pid)
        self._in, self._out, self._output = request_write, reply_read, output_read
        for fd in (self._in, self._out, self._output):
            os.set_blocking(fd, False)
        # A child nobody holds any more is ended with its session, not left idle.
        self._finalizer = weakref.finalize(self, _end_session, self.process,
                                           (self._in, self._out, self._output), self.folder,
                                           self.cgroup)
        self._memory_kills = 0
        self._output_open = True
        self._buffer = bytearray()  # read from the channel, not yet taken
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_size = 0
        self.output_bytes = 0  # all the process wrote besides the channel
        self.left_behind = 0  # its descendants and strays ended with it or after a case
        self.grown = False  # its processes' memory grew past the limit
        # Never swept: the first sweep after a start looks at once, so a process whose memory
        # is past the limit from its start is seen at its first case, however fast the cases.
        self._swept = -math.inf

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
        memory = ""
        if self.cgroup is not None and self.cgroup.memory_kills() > self._memory_kills:
            self._memory_kills = self.cgroup.memory_kills()
            self.grown = True
            memory = ("; the kernel killed a process of it for the memory limit of its "
                      "control group (its whole tree's memory, shared memory and memfds "
                      "included)")
        if status < 0:
            name = signal.Signals(-status).name if -status in signal.valid_signals() else ""
            return (f"it was killed by signal {-status} {name} {when}{_meaning(name)}"
                    f"{memory}").replace("  ", " ")
        if self.sandboxed and status - 128 in signal.valid_signals():
            # bubblewrap exits with 128 + the signal that killed what it ran.
            name = signal.Signals(status - 128).name
            return (f"it was killed by signal {status - 128} {name}, or exited with status "
                    f"{status} (through the sandbox the two look alike) {when}{_meaning(name)}"
                    f"{memory}")
        return f"it exited with status {status} {when}"

    # --- the end -----------------------------------------------------------------------

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """End its session, every process below it however it detached, and everything
        that still carries this child's token."""
        table = processes()
        below = descendants(self.process.pid, table) if self.alive() else []
        serving = set(self._serving(strays(table, STARTED)))  # before its pipes are closed
        # Killed before its session, so that each is counted once, while it still runs; in
        # a sandbox, the first two below are its PID namespace's init and the process itself,
        # not anything left behind.
        killed = kill_all(below, table)
        self.left_behind += max(killed - 2 * self.sandboxed, 0)
        self._finalizer()
        STARTED.discard(self.process.pid)
        table = processes()
        others = strays(table, STARTED)
        self.left_behind += kill_all([pid for pid in others if pid not in below and
                                      pid not in serving], table)
        kill_all([pid for pid in others if pid in serving], table)
        reap(others)
        for pid in _carrying(self.token):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def sweep(self, every: float = SWEEP_SECONDS) -> None:
        """After a case, at most every `every` seconds: end the processes its descendants
        detached (handed back to the suite, its subreaper), and see whether its processes'
        memory grew past the limit (`grown`)."""
        if self.confinement is None or time.monotonic() - self._swept < every:
            return
        self._swept = time.monotonic()
        table = processes()
        # A server that handed its pipes to a daemon of its own: the daemon is the
        # implementation now, not something left behind.
        detached = strays(table, STARTED)
        serving = set(self._serving(detached))
        others = [pid for pid in detached if pid not in serving]
        self.left_behind += kill_all(others, table)
        reap(others)
        if self.sandboxed:  # detached inside the sandbox: handed to its PID namespace's init
            self.left_behind += kill_all(self._detached_in_sandbox(table), table)
        tree = [self.process.pid, *descendants(self.process.pid, table)]
        self.grown = _resident(tree) > self.confinement.memory_limit

    def _serving(self, pids: list[int]) -> list[int]:
        """Those of `pids` that hold this child's channel: its daemon, if it made one."""
        try:
            channel = {f"pipe:[{os.fstat(fd).st_ino}]" for fd in (self._in, self._out)}
        except OSError:
            return []
        holding = []
        for pid in pids:
            with contextlib.suppress(OSError):
                folder = f"/proc/{pid}/fd"
                if any(os.readlink(f"{folder}/{fd}") in channel for fd in os.listdir(folder)):
                    holding.append(pid)
        return holding

    def _detached_in_sandbox(self, table) -> list[int]:
        """The processes below the sandbox's init that are not below the process it
        started first (the implementation's own): the ones that detached from it."""
        inits = [pid for pid, (parent, _, _) in table.items() if parent == self.process.pid]
        below = [pid for pid, (parent, _, _) in table.items() if parent in inits]
        if len(below) < 2:
            return []
        first = min(below, key=_started)
        return [pid for pid in below if pid != first for pid in (pid, *descendants(pid, table))]


class Holding:
    """What the transports that hold a started process (worker.py, command.py) share: the
    process, what they had to end of the implementation's (docs/isolation.md, "Isolation"), and the
    sweep at the end of each check."""

    child: Child | None
    _ended: Ended  # of the processes it started and ended

    @property
    def ended(self) -> Ended:
        """What it had to end of the implementation's, its running process's included."""
        now = self.child.left_behind if self.child is not None else 0
        return Ended(self._ended.left_behind + now, self._ended.memory)

    def sweep(self) -> None:
        """End now what its process left running detached (at the end of each check)."""
        if self.child is not None:
            self.child.sweep(every=0)

    def _let_go(self) -> None:
        """Kill its process, and everything that process left, counted."""
        if self.child is not None:
            self.child.kill()
            self._ended.left_behind += self.child.left_behind
            self.child = None


def _end_session(process: subprocess.Popen, ours: tuple[int, ...], folder: str | None,
                 cgroup=None) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    for fd in ours:
        with contextlib.suppress(OSError):
            os.close(fd)
    if folder:
        remove_folder(folder)
    if cgroup is not None:
        _emptied(cgroup)


def _emptied(cgroup) -> None:
    """Kill what is left in the group (nothing, when its session is gone), then remove it."""
    for folder in cgroup.folders:
        with contextlib.suppress(OSError, ValueError), open(f"{folder}/cgroup.procs") as f:
            for pid in f.read().split():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)
    for _ in range(50):
        cgroup.remove()
        if not any(os.path.exists(f) for f in cgroup.folders):
            return
        time.sleep(0.02)


def _before_exec(confinement: Confinement | None, cgroup, tasks: int | None) -> None:
    _die_with_parent()
    if cgroup is not None:
        cgroup.join()  # before anything runs: all it starts is in the group
    if confinement is not None:
        confinement.limit(tasks)


def _started(pid: int) -> int:
    """When a process started, in clock ticks since boot (Linux's /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
        return int(text[text.rfind(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _resident(pids: list[int]) -> int:
    """The resident memory of these processes, in bytes (Linux's /proc; elsewhere 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * PAGE
    return total


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
