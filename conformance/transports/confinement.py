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
  sandbox: only what the implementation needs, read-only (the system's programs and
  libraries, the parts of /etc they read, the interpreter's installation and import path,
  the implementation's own files, with the files their owner keeps to itself masked), its
  temporary folders as small tmpfs, no network, its own user (never root, no capability) and
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
from collections.abc import Sequence
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
    """Whether bubblewrap is installed and can make a sandbox here, as the suite makes it (a
    container may forbid the namespaces it needs)."""
    program = shutil.which("bwrap")
    if program is None or not os.access(_BASH, os.X_OK):
        return False
    try:
        return subprocess.run([program, *_sandbox(64 << 20), "--", _BASH, "-c", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


_BASH = "/bin/bash"  # moves the channel into place inside the sandbox
LAYERS = ("reference", "generators", "conformance", "reports", "implementations", "adapters")
NOBODY = 65534  # the user (and group) the sandbox runs as when the suite runs as root
# The system's programs and libraries: bound read-only (or, where a merged /usr makes them
# links, made the same links).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
# What of /etc the loader, libc, Python and TLS read; never /etc/shadow and its kind.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "nsswitch.conf",
       "passwd", "group", "hosts", "host.conf", "resolv.conf", "gai.conf", "ssl",
       "ca-certificates", "ca-certificates.conf", "alternatives", "mime.types",
       "locale.alias", "locale.conf", "os-release", "debian_version", "python3",
       "fonts", "xdg")
# Names of files that hold secrets, masked in the implementation's own folders whatever
# their mode (besides every file there its owner keeps to itself).
SECRET_NAMES = (".env", ".netrc", ".pypirc", ".npmrc", ".git-credentials", ".pgpass",
                "credentials", "id_rsa", "id_ed25519", "id_ecdsa")


def _sandbox(memory_limit: int) -> list[str]:
    """The sandbox's namespaces and its writable places: tmpfs each at most a quarter of the
    memory limit (what they hold is memory the data limit does not count), the root itself
    read-only once the binds are made (the binds follow these)."""
    tmpfs = str(max(memory_limit // 4, 16 << 20))
    user = ["--uid", str(NOBODY), "--gid", str(NOBODY)] if os.geteuid() == 0 else []
    return ["--unshare-user", *user, "--disable-userns", "--cap-drop", "ALL",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--dev", "/dev", "--proc", "/proc",
            "--size", tmpfs, "--tmpfs", "/tmp", "--size", tmpfs, "--tmpfs", "/dev/shm",
            *_system_binds()]


def _system_binds() -> list[str]:
    binds: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            binds += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            binds += ["--ro-bind", path, path]
    for name in ETC:
        binds += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # Its TLS certificates, not the host's keys: mapped to root's user as root, the
    # implementation would read a folder only its owner may.
    if os.path.isdir("/etc/ssl/private"):
        binds += ["--tmpfs", "/etc/ssl/private"]
    return binds


def python_reach() -> list[str]:
    """What a Python worker needs to read: the interpreter's installation (the environment's
    and the one it was made from), its import path, and this package wherever it is
    installed (an editable install points outside site-packages)."""
    import importlib.util

    import gradient_conformance
    package = os.path.dirname(os.path.abspath(gradient_conformance.__file__))
    # Not the current folder, which `python -m` puts on the path: the user's, reached only
    # where the implementation is a module looked up there (own_files).
    here = os.path.realpath(os.getcwd())
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), package,
             *(p for p in sys.path if p and os.path.realpath(p) != here)]
    # An editable install maps each layer (reference/, conformance/, ...) to a folder of the
    # checkout, and links the data it ships there.
    with contextlib.suppress(OSError):
        found += [os.path.realpath(e.path) for e in os.scandir(package) if e.is_symlink()]
    for layer in LAYERS:
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(f"gradient_conformance.{layer}")
            found += list(spec.submodule_search_locations or []) if spec else []
    return found


def own_files(spec: str, base: str) -> list[str]:
    """What a Python implementation named `spec` (from `base`) is made of: a `.py` file's
    folder (importable beside it), or for a module name `base`, where it is looked up first;
    nothing for the suite's own oracle and its variants."""
    if spec == "reference" or spec.startswith("variant:"):
        return []
    if spec.endswith(".py"):
        return [os.path.dirname(os.path.realpath(os.path.join(base, spec)))]
    return [base]


def program_files(argv: list[str], cwd: str | None) -> list[str]:
    """What a `cmd:` program is made of: each word of its command line that names a file or
    a folder (a file's folder; a program in a `bin` folder, the installation around it) and
    the program the first word finds on PATH."""
    found = []
    words = [*argv, *([shutil.which(argv[0]) or ""] if argv else [])]
    for word in filter(None, words):
        named = os.path.abspath(os.path.join(cwd or os.getcwd(), word))
        # The path as written (a venv's bin/python, a link) and the file it leads to.
        for path in dict.fromkeys((named, os.path.realpath(named))):
            if not os.path.exists(path):
                continue
            folder = path if os.path.isdir(path) else os.path.dirname(path)
            found.append(os.path.dirname(folder) if os.path.basename(folder) == "bin"
                         else folder)
    return found


def _own_binds(reach: list[str], folder: str) -> list[str]:
    """Read-only binds of the paths in `reach` that exist (each once, outermost first; none
    inside the private folder, nor / itself), each folder's top-level files that hold secrets
    masked: those their owner keeps to itself (no read for others) and those named as secrets
    are (`SECRET_NAMES`)."""
    paths = sorted({os.path.realpath(p) for p in reach if p and os.path.exists(p)},
                   key=lambda p: (p.count(os.sep), p))
    kept: list[str] = []
    inside = [*(p for p in SYSTEM if not os.path.islink(p)), folder]  # bound otherwise
    for path in paths:
        if path != os.sep and not any(path == k or path.startswith(k + os.sep)
                                      for k in (*inside, *kept)):
            kept.append(path)
    binds: list[str] = []
    for path in kept:
        binds += ["--ro-bind", path, path]
        if os.path.isdir(path):
            binds += [a for name in _secrets(path)
                      for a in ("--ro-bind", "/dev/null", os.path.join(path, name))]
    return binds


def _secrets(folder: str) -> list[str]:
    """The files directly in `folder` that hold secrets: named so, or kept from others."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                if not entry.is_file(follow_symlinks=False):
                    continue
                if entry.name in SECRET_NAMES or entry.name.startswith(".env") or \
                        not entry.stat(follow_symlinks=False).st_mode & 0o004:
                    found.append(entry.name)
    return found


@dataclass(frozen=True)
class Confinement:
    """How the implementation's processes are confined (docs/isolation.md, "Isolation")."""

    memory_limit: int
    sandbox: str = "auto"
    pass_env: tuple[str, ...] = ()

    @classmethod
    def asked(cls, memory_limit: int | None, sandbox: str, pass_env, sharing: int = 1):
        """As the containment options ask (options.add_containment, for the suite or a
        command): no memory limit given, the default shared among `sharing` processes."""
        return cls(memory_limit or default_memory_limit(sharing), sandbox, tuple(pass_env))

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
        held = ("in a bubblewrap sandbox (only the system, its interpreter and its own files, "
                "read-only; no network; its own user and PID namespace)"
                if self.sandbox == "bwrap" else "with no sandbox (it runs as your user: it "
                "can read and write what you can, and signal the suite; a SIGSTOP it sends "
                "stops the run for good)")
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
                channel: tuple[int, int] = (0, 1), reach: Sequence[str] = ()) -> list[str]:
        """`argv` as started under this confinement (the sandbox's own arguments first), in
        `cwd`; in a sandbox, the `channel` descriptors are made its stdin and stdout, and it
        reads only the system, the paths in `reach` (the implementation's own files, its
        interpreter; `cwd` among them) and its private folder, a tmpfs."""
        if self.sandbox != "bwrap":
            return argv
        program = shutil.which("bwrap") or "bwrap"
        into, out = channel
        # bash, not sh: Debian's sh cannot redirect a descriptor above 9.
        move = f'exec 0<&{into} 1>&{out} {into}<&- {out}>&-; exec "$@"'
        size = str(max(self.memory_limit // 4, 16 << 20))
        return [program, *_sandbox(self.memory_limit), *_own_binds(list(reach), folder),
                "--size", size, "--tmpfs", folder, "--remount-ro", "/", "--chdir", cwd, "--",
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
