"""What the implementation's process may reach: its memory, its files, its environment and
its processes. docs/isolation.md, "Isolation".

A `Confinement` is set on every process the suite starts for an implementation (a Python
worker or a `cmd:` program) before that process runs a line of the implementation's code:

- limits (`setrlimit`): its data segment (heap and private mappings) to `memory_limit`
  bytes, each file it writes to `FILE_LIMIT`, no core files;
- a private temporary folder as its home, temporary folder and (for a Python worker) its
  working folder, removed when the process ends;
- an environment built from an allow-list (`KEPT`) and the names the user passes on;
- where Debian's bubblewrap is installed (`sandbox="auto"`, or `"bwrap"` to insist), a
  sandbox: the whole filesystem read-only but that temporary folder, no network, its own
  PID namespace (so no process it starts outlives it, and it cannot see the suite's).

Nothing here is trusted to the implementation: it cannot raise a limit it was given, and the
sandbox is set up by a process it never runs in.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from gradient_conformance.reference.exact import ROUNDING

SANDBOXES = ("auto", "bwrap", "none")
FILE_LIMIT = 1 << 30  # bytes in any one file the implementation writes
# What the implementation's environment keeps of the suite's: enough to find programs and
# libraries and to speak the user's language; no tokens, keys or credentials.
KEPT = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ", "TERM",
        "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONIOENCODING",
        "VIRTUAL_ENV", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS", "NODE_PATH")


def default_memory_limit(sharing: int = 1) -> int:
    """Half the machine's memory, shared among the `sharing` processes that run the suite
    at once (xdist's): what the implementation may take without sending the machine to the
    OOM killer. 4 GiB where the machine does not say."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30
    return max(total // 2 // max(sharing, 1), 256 << 20)


def parse_size(text: str) -> int:
    """`8G`, `512M`, `1.5GiB`, `1000000` (bytes): a size in bytes, or ValueError."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = cleaned.rstrip("KMGT"), cleaned[len(cleaned.rstrip("KMGT")):]
    if unit not in units or not number:
        raise ValueError(f"{text!r} is not a size (say 8G, 512M or a number of bytes)")
    try:
        size = int(float(number) * units[unit])
    except ValueError:
        raise ValueError(f"{text!r} is not a size (say 8G, 512M or a number of bytes)") \
            from None
    if size < 64 << 20:
        raise ValueError(f"{text!r} is below 64M, too little for a Python worker")
    return size


def shown_size(size: int) -> str:
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"


def bwrap_usable() -> bool:
    """Whether bubblewrap is installed and can make a sandbox here (a container may forbid
    the namespaces it needs)."""
    program = shutil.which("bwrap")
    if program is None or not os.access(_BASH, os.X_OK):
        return False
    try:
        return subprocess.run([program, *_SANDBOX, "--", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


_BASH = "/bin/bash"  # moves the channel into place inside the sandbox
# The sandbox's filesystem and namespaces, the private folder bound after these.
_SANDBOX = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--new-session"]


@dataclass(frozen=True)
class Confinement:
    """How the implementation's processes are confined (docs/isolation.md, "Isolation")."""

    memory_limit: int
    sandbox: str = "auto"
    pass_env: tuple[str, ...] = ()

    def __post_init__(self):
        if self.sandbox not in SANDBOXES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOXES)}, not "
                             f"{self.sandbox!r}")

    def resolved(self) -> Confinement:
        """The same, with `auto` decided: `bwrap` where bubblewrap works, else `none`. A
        demanded `bwrap` that does not work is a ValueError saying so."""
        if self.sandbox == "auto":
            return Confinement(self.memory_limit, "bwrap" if bwrap_usable() else "none",
                               self.pass_env)
        if self.sandbox == "bwrap" and not bwrap_usable():
            raise ValueError("--sandbox=bwrap: bubblewrap is not installed, or cannot make a "
                             "sandbox here (Debian: apt install bubblewrap)")
        return self

    def words(self) -> str:
        """What holds, for the report."""
        held = ("in a bubblewrap sandbox (read-only filesystem, no network, its own PID "
                "namespace)" if self.sandbox == "bwrap" else "with no sandbox")
        return (f"{held}, memory limited to {shown_size(self.memory_limit)}, environment "
                f"scrubbed" + (f" (passed on: {', '.join(self.pass_env)})" if self.pass_env
                               else ""))

    def environment(self, folder: str) -> dict[str, str]:
        kept = {name: os.environ[name] for name in (*KEPT, *self.pass_env)
                if name in os.environ}
        # Rational rounding, and mpmath on its own integers: gmpy2 is not loaded there unless
        # the implementation loads it (reference/exact.py says why).
        return {**kept, "HOME": folder, "TMPDIR": folder, "XDG_CACHE_HOME": f"{folder}/.cache",
                ROUNDING: "rational", "MPMATH_NOGMPY": "1"}

    def command(self, argv: list[str], folder: str, cwd: str,
                channel: tuple[int, int] = (0, 1)) -> list[str]:
        """`argv` as started under this confinement (the sandbox's own arguments first), in
        `cwd`; in a sandbox, the `channel` descriptors are made its stdin and stdout."""
        if self.sandbox != "bwrap":
            return argv
        program = shutil.which("bwrap") or "bwrap"
        into, out = channel
        # bash, not sh: Debian's sh cannot redirect a descriptor above 9.
        move = f'exec 0<&{into} 1>&{out} {into}<&- {out}>&-; exec "$@"'
        return [program, *_SANDBOX, "--bind", folder, folder, "--chdir", cwd, "--",
                _BASH, "-c", move, "bash", *argv]

    def limit(self) -> None:
        """In the started process, before it runs anything: the limits."""
        for which, value in ((resource.RLIMIT_DATA, self.memory_limit),
                             (resource.RLIMIT_FSIZE, FILE_LIMIT), (resource.RLIMIT_CORE, 0)):
            with contextlib.suppress(ValueError, OSError):
                _soft, hard = resource.getrlimit(which)
                cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(which, (cap, cap))


@dataclass
class Ended:
    """What a transport had to end of an implementation's: processes it left behind
    (descendants still running when its process was ended, and processes that detached),
    and workers started again because their memory ran out or grew past the limit."""

    left_behind: int = 0
    memory: int = 0

    def words(self) -> str:
        said = []
        if self.left_behind:
            said.append(f"{self.left_behind} process{'es' if self.left_behind > 1 else ''} "
                        "it left running killed")
        if self.memory:
            said.append(f"started again {self.memory} time{'s' if self.memory > 1 else ''} "
                        "after running out of memory (or growing past the limit)")
        return "; ".join(said)


def private_folder() -> str:
    return tempfile.mkdtemp(prefix="gradient-conformance-impl-")


def remove_folder(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


# --- processes left behind ------------------------------------------------------------------


def become_subreaper() -> None:
    """Make this process the one every orphaned descendant is handed to (Linux's
    PR_SET_CHILD_SUBREAPER), so that a process the implementation detaches (a double fork,
    setsid) comes back to the suite to be killed, instead of to init. Elsewhere nothing."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def _stat(pid: int) -> tuple[int, int, bool] | None:
    """(parent pid, session id, whether it is running) of a process: None if it is gone,
    False for a zombie, which has ended and waits to be reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2:].split()
    return int(fields[1]), int(fields[3]), fields[0] != b"Z"


def processes() -> dict[int, tuple[int, int, bool]]:
    """Every process's (parent, session), from Linux's /proc; elsewhere none."""
    found: dict[int, tuple[int, int, bool]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                stat = _stat(int(name))
                if stat is not None:
                    found[int(name)] = stat
    return found


def descendants(root: int, table: dict[int, tuple[int, int, bool]]) -> list[int]:
    """The processes below `root` in `table`, nearest first."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, frontier = [], [root]
    while frontier:
        below = [c for p in frontier for c in children.get(p, [])]
        found += below
        frontier = below
    return found


def strays(table: dict[int, tuple[int, int, bool]], ours: set[int]) -> list[int]:
    """This process's children that it did not start as an implementation's process and
    that are not in its own session: descendants of an implementation's process handed
    back to the suite (as subreaper) when they detached. The suite's own helpers (a Dask
    cluster's processes, say) are in its session, and left alone."""
    me, session = os.getpid(), os.getsid(0)
    return [pid for pid, (parent, sid, _) in table.items()
            if parent == me and pid not in ours and sid != session]


def kill_all(pids: list[int], table: dict[int, tuple[int, int, bool]]) -> int:
    """SIGKILL each; how many were running (not zombies) when killed."""
    killed = 0
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed += table.get(pid, (0, 0, False))[2]
    return killed


def reap(pids: list[int]) -> None:
    """Wait for each (they must be this process's children, killed or ended)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
