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
  sandbox: only what the implementation needs, bound explicitly and read-only (the system's
  programs and libraries, the parts of /etc they read, the interpreter's installation and
  import path, this package, the implementation's own module or package or program and the
  files its command line names, and what the user binds), never a home, /tmp, /run or a
  folder above one; its temporary folders as small tmpfs, no network, its own user (never
  root, inside or out; no capability), PID and IPC namespaces (so no process it starts
  outlives it, and it cannot see the suite's), no keyring (kernel.py's seccomp filter);
- where a control group can be made (as root), its whole tree's memory and tasks bounded
  (kernel.py).

Nothing here is trusted to the implementation: it cannot raise a limit it was given, and the
sandbox is set up by a process it never runs in.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from gradient_conformance.conformance.transports import kernel
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
    filtering = filter_descriptor()
    try:
        return subprocess.run([program, *_sandbox(64 << 20, filtering), "--", *_as_nobody(),
                               _BASH, "-c", "true"], capture_output=True, timeout=10,
                              pass_fds=(filtering,) if filtering is not None else ()
                              ).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        if filtering is not None:
            os.close(filtering)


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
# Shared places of the host: never bound, nor a folder above one (a home is one too).
SHARED = ("/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm", "/dev", "/proc", "/root")


def _sandbox(memory_limit: int, filtering: int | None) -> list[str]:
    """The sandbox's namespaces and its writable places: tmpfs each at most a quarter of the
    memory limit (what they hold is memory the data limit does not count), the root itself
    read-only once the binds are made (the binds follow these). As root, no user namespace:
    bubblewrap makes the rest as root and `_as_nobody` then drops to the user nobody, who is
    nobody outside too (a user namespace would map it to root outside, the owner of the
    host's files). `filtering`: the descriptor of kernel.py's seccomp filter, if any."""
    tmpfs = str(max(memory_limit // 4, 16 << 20))
    user = [] if os.geteuid() == 0 else ["--unshare-user", "--disable-userns", "--cap-drop",
                                         "ALL"]
    seccomp = ["--seccomp", str(filtering)] if filtering is not None else []
    return [*user, *seccomp, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--dev", "/dev", "--proc", "/proc",
            "--perms", "1777", "--size", tmpfs, "--tmpfs", "/tmp",
            "--perms", "1777", "--size", tmpfs, "--tmpfs", "/dev/shm", *_system_binds()]


def _as_nobody() -> list[str]:
    """As root: the command that drops to nobody with no capability and no way back, run
    inside the sandbox before anything of the implementation's."""
    if os.geteuid() != 0:
        return []
    return ["/usr/bin/setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def filter_descriptor() -> int | None:
    """A descriptor to read kernel.py's seccomp filter from (a pipe holding it), or None on
    an architecture it does not know."""
    program = kernel.seccomp_program()
    if program is None:
        return None
    read, write = os.pipe()
    os.write(write, program)  # 8 bytes an instruction: far below a pipe's buffer
    os.close(write)
    return read


def _system_binds() -> list[str]:
    binds: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            binds += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            binds += ["--ro-bind", path, path]
    binds += ["--perms", "0755", "--dir", "/etc"]  # made 0700 otherwise: closed to nobody
    for name in ETC:
        binds += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    if os.path.isdir("/etc/ssl/private"):  # the host's TLS keys, not its certificates
        binds += ["--tmpfs", "/etc/ssl/private"]
    return binds


def homes() -> set[str]:
    """The users' homes: this user's, root's, and every home under /home."""
    import pwd
    found = {os.path.realpath(os.path.expanduser("~")), "/root"}
    with contextlib.suppress(OSError, KeyError):
        found |= {os.path.realpath(p.pw_dir) for p in pwd.getpwall()
                  if p.pw_dir.startswith("/home/")}
    return {h for h in found if h != os.sep}


def refused(path: str, shared: set[str] | None = None) -> bool:
    """Whether `path` is never bound: a home or a shared place of the host (`SHARED`), or a
    folder above one (/, /home, /var)."""
    path = os.path.realpath(path)
    for place in shared if shared is not None else {*SHARED, *homes()}:
        place = os.path.realpath(place)
        if path == place or place.startswith(path.rstrip(os.sep) + os.sep):
            return True
    return False


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
    """What a Python implementation named `spec` (from `base`) is made of: a `.py` file
    alone; for a module name, the file or the package's folder it names in `base`, where the
    worker looks it up first (nothing there: an installed module, in the import path).
    Nothing for the suite's own oracle and its variants."""
    if spec == "reference" or spec.startswith("variant:"):
        return []
    if spec.endswith(".py"):
        found = [os.path.join(base, spec)]
    else:
        top = os.path.join(base, spec.split(".")[0])
        found = [p for p in (top + ".py", top) if os.path.lexists(p)][:1]
    for path in found:
        real = os.path.realpath(path)
        # A link may lead anywhere: to the project's folder or above it (`solution.py ->
        # ..`), a home, /tmp. What it leads to is bound only where it is a module file or
        # a package's folder, and neither the current folder nor one above it.
        if os.path.isdir(real) and (not os.path.isfile(os.path.join(real, "__init__.py")) or
                                    refused(real, {base})):
            raise ValueError(f"{path} leads to the folder {real}, which is no package of its "
                             "own (it is the current folder, above it, or has no "
                             "__init__.py): bind what it needs with --sandbox-bind")
        if not (os.path.isdir(real) or real.endswith(".py")):
            raise ValueError(f"{path} leads to {real}, which is no Python module")
    return [os.path.realpath(p) for p in found]



def program_files(argv: list[str], cwd: str | None) -> list[str]:
    """What a `cmd:` program is made of: the program (in a `bin` folder of an installation
    that is no home, the installation: a venv's interpreter needs its packages) and each
    file its other words name, each file alone (a word naming a folder binds nothing:
    --sandbox-bind does)."""
    if not argv:
        return []
    found = []
    program = shutil.which(argv[0]) or argv[0]
    for path in dict.fromkeys((os.path.abspath(os.path.join(cwd or os.getcwd(), program)),
                               os.path.realpath(os.path.join(cwd or os.getcwd(), program)))):
        if not os.path.isfile(path):
            continue
        folder = os.path.dirname(path)
        installation = os.path.dirname(folder)
        found.append(installation if os.path.basename(folder) == "bin" and
                     os.path.exists(os.path.join(installation, "pyvenv.cfg")) and
                     not refused(installation) else path)
    for word in argv[1:]:
        named = os.path.abspath(os.path.join(cwd or os.getcwd(), word))
        # A word is bound only as the file it names where it is one, never through a link
        # (`cfg -> ~/.gitconfig` binds nothing): what a link leads to is not what was named.
        if os.path.isfile(named) and os.path.realpath(named) == named:
            found.append(named)
    return found


def _own_binds(reach: list[str], folder: str, *, scanned: Sequence[str] = ()
               ) -> list[str]:
    """Read-only binds of the paths in `reach` that exist (each once, outermost first; none
    inside the private folder, nor a home or a shared place or a folder above one), at the
    same path. In the folders of `scanned` (the implementation's own and the user's binds),
    a socket, FIFO or device is hidden behind /dev/null: nothing there reaches outside."""
    shared = {*SHARED, *homes()}
    paths = sorted({os.path.realpath(p) for p in reach if p and os.path.exists(p)},
                   key=lambda p: (p.count(os.sep), p))
    kept: list[str] = []
    inside = [*(p for p in SYSTEM if not os.path.islink(p)), folder]  # bound otherwise
    for path in paths:
        if refused(path, shared) or any(path == k or path.startswith(k + os.sep)
                                        for k in (*inside, *kept)):
            continue
        if not (os.path.isdir(path) or os.path.isfile(path)):
            continue  # a socket, a FIFO, a device: never from outside
        kept.append(path)
    scan = {os.path.realpath(p) for p in scanned}
    binds: list[str] = []
    made: set[str] = set()
    for path in kept:
        binds += _folders_above(path, made)
        binds += ["--ro-bind", path, path]
        if os.path.isdir(path) and any(path == s or path.startswith(s + os.sep) or
                                       s.startswith(path + os.sep) for s in scan):
            for special in _specials(path):
                binds += ["--ro-bind", "/dev/null", special]
    return binds


def _folders_above(path: str, made: set[str]) -> list[str]:
    """The folders above `path` that the sandbox makes (bubblewrap would make them 0700,
    which the user nobody cannot pass through), each once, readable by all."""
    out = []
    parts = path.strip(os.sep).split(os.sep)[:-1]
    for k in range(1, len(parts) + 1):
        folder = os.sep + os.sep.join(parts[:k])
        if folder not in made and folder not in ("/usr", "/sys"):
            made.add(folder)
            out += ["--perms", "0755", "--dir", folder]
    return out


SCAN_LIMIT = 100_000  # entries looked at in one bound folder for sockets and FIFOs


def _specials(folder: str) -> list[str]:
    """The sockets, FIFOs and devices under `folder` (not through links); a folder too large
    to look through is refused by a ValueError, never bound unseen."""
    found, seen, stack = [], 0, [folder]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                seen += 1
                if seen > SCAN_LIMIT:
                    raise ValueError(f"{folder} holds more than {SCAN_LIMIT} entries: too many "
                                     "to look through for sockets before binding it")
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif not entry.is_symlink() and not entry.is_file(follow_symlinks=False):
                        found.append(entry.path)
    return found


@dataclass(frozen=True)
class Confinement:
    """How the implementation's processes are confined (docs/isolation.md, "Isolation").
    `binds`: what the user bound besides (--sandbox-bind); `bounded`: whether a control group
    bounds the whole tree's memory and tasks (decided with the sandbox, by `resolved`).
    `as_text` and `from_text` carry a decided one to another process."""

    memory_limit: int
    sandbox: str = "auto"
    pass_env: tuple[str, ...] = ()
    binds: tuple[str, ...] = ()
    bounded: bool = False
    decided: bool = False  # by `resolved`, in the process the user started

    @classmethod
    def asked(cls, memory_limit: int | None, sandbox: str, pass_env, sharing: int = 1,
              binds=()):
        """As the containment options ask (options.add_containment, for the suite or a
        command): no memory limit given, the default shared among `sharing` processes."""
        return cls(memory_limit or default_memory_limit(sharing), sandbox, tuple(pass_env),
                   tuple(os.path.abspath(b) for b in binds))

    def __post_init__(self):
        if self.sandbox not in SANDBOXES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOXES)}, not "
                             f"{self.sandbox!r}")

    def resolved(self) -> Confinement:
        """The same, decided: `auto` as `bwrap` where bubblewrap works, else `none`, and
        whether a control group can be made. Decided once, by the process the user started,
        and handed to every process that starts an implementation (xdist's workers, fuzz's
        sessions and tasks), which never decide again: a sandbox that then cannot start is
        an error of that case. A demanded `bwrap` that does not work is a ValueError."""
        if self.sandbox == "auto":
            sandbox = "bwrap" if bwrap_usable() else "none"
        elif self.sandbox == "bwrap" and not bwrap_usable():
            raise ValueError("--sandbox=bwrap: bubblewrap is not installed, or cannot make a "
                             "sandbox here (Debian: apt install bubblewrap)")
        else:
            sandbox = self.sandbox
        for path in self.binds:
            if not os.path.exists(path):
                raise ValueError(f"--sandbox-bind {path}: no such file or folder")
        probe = kernel.make_cgroup(f"{kernel.CGROUP_PREFIX}{os.getpid()}-probe",
                                   self.memory_limit)
        if probe is not None:
            probe.remove()
        return dataclasses.replace(self, sandbox=sandbox, bounded=probe is not None,
                                   decided=True)

    def as_text(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_text(cls, text: str) -> Confinement:
        """A confinement another process decided (as_text); ValueError if it is none."""
        try:
            said = json.loads(text)
            made = cls(int(said["memory_limit"]), str(said["sandbox"]),
                       tuple(map(str, said["pass_env"])), tuple(map(str, said["binds"])),
                       bool(said["bounded"]), bool(said["decided"]))
        except (ValueError, TypeError, KeyError) as problem:
            raise ValueError(f"not a confinement: {problem}") from None
        if not made.decided or made.sandbox == "auto":
            raise ValueError("a confinement handed on must be decided")
        return made

    def words(self) -> str:
        """What holds, for the report."""
        held = ("in a bubblewrap sandbox (only the system, its interpreter and its own files, "
                "read-only; no network, no keyring; its own unprivileged user, PID and IPC "
                "namespaces)" if self.sandbox == "bwrap" else "with no sandbox (it runs as "
                "your user: it can read and write what you can, and signal the suite; a "
                "SIGSTOP it sends stops the run for good)")
        binds = f", also bound: {', '.join(self.binds)}" if self.binds and \
            self.sandbox == "bwrap" else ""
        memory = (f"memory limited to {shown_size(self.memory_limit)} for its whole tree "
                  f"(a control group: shared memory and memfds count), at most "
                  f"{kernel.TASK_LIMIT} tasks" if self.bounded else
                  f"memory limited to {shown_size(self.memory_limit)} per process (shared "
                  "memory and memfds not counted: no control group could be made), at most "
                  f"{kernel.TASK_LIMIT} tasks more than its user had (RLIMIT_NPROC)")
        if self.sandbox != "bwrap":
            memory += ", shared memory it leaves (SysV segments, /dev/shm) not removed"
        return (f"{held}{binds}, {memory}, environment scrubbed"
                + (f" (passed on: {', '.join(self.pass_env)})" if self.pass_env else ""))

    def environment(self, folder: str) -> dict[str, str]:
        kept = {name: os.environ[name] for name in (*KEPT, *self.pass_env)
                if name in os.environ}
        # Rational rounding, and mpmath on its own integers: gmpy2 is not loaded there unless
        # the implementation loads it (reference/exact.py says why).
        return {**kept, "HOME": folder, "TMPDIR": folder, "XDG_CACHE_HOME": f"{folder}/.cache",
                ROUNDING: "rational", "MPMATH_NOGMPY": "1"}

    def command(self, argv: list[str], folder: str, cwd: str,
                channel: tuple[int, int] = (0, 1), reach: Sequence[str] = (),
                own: Sequence[str] = (), filtering: int | None = None) -> list[str]:
        """`argv` as started under this confinement (the sandbox's own arguments first), in
        `cwd`; in a sandbox, the `channel` descriptors are made its stdin and stdout, and it
        reads only the system, the paths in `reach` (its interpreter), `own` (the
        implementation's own files) and the user's binds, and its private folder, a tmpfs.
        `cwd` is there, empty but for what is bound in it. `filtering`: the seccomp filter's
        descriptor (filter_descriptor), passed to the process."""
        if self.sandbox != "bwrap":
            return argv
        program = shutil.which("bwrap") or "bwrap"
        into, out = channel
        # bash, not sh: Debian's sh cannot redirect a descriptor above 9.
        move = f'exec 0<&{into} 1>&{out} {into}<&- {out}>&-; exec "$@"'
        size = str(max(self.memory_limit // 4, 16 << 20))
        binds = _own_binds([*reach, *own, *self.binds], folder,
                           scanned=[*own, *self.binds])
        return [program, *_sandbox(self.memory_limit, filtering), *binds,
                "--size", size, "--perms", "1777", "--tmpfs", folder,
                *_folders_above(os.path.join(cwd, "."), set()),
                "--remount-ro", "/", "--chdir", cwd, "--", *_as_nobody(),
                _BASH, "-c", move, "bash", *argv]

    def cgroup(self, name: str) -> kernel.Cgroup | None:
        """The control group of one started process, where `bounded`; a group that cannot
        be made then is an OSError: the process is not started unbounded."""
        if not self.bounded:
            return None
        made = kernel.make_cgroup(name, self.memory_limit)
        if made is None:
            raise OSError(f"the control group that bounds its memory could not be made "
                          f"({name})")
        return made

    def tasks(self) -> int:
        """Its RLIMIT_NPROC: as many tasks as the user it runs as has now, and TASK_LIMIT
        more (the limit counts all of that user's tasks); computed in the suite's process,
        before the start."""
        return kernel.tasks_of(NOBODY if os.geteuid() == 0 and self.sandbox == "bwrap"
                               else os.getuid()) + kernel.TASK_LIMIT

    def limit(self, tasks: int | None = None) -> None:
        """In the started process, before it runs anything: the limits (`tasks`: its
        RLIMIT_NPROC, from `tasks()`)."""
        for which, value in ((resource.RLIMIT_DATA, self.memory_limit),
                             (resource.RLIMIT_FSIZE, FILE_LIMIT), (resource.RLIMIT_CORE, 0),
                             *([(resource.RLIMIT_NPROC, tasks)] if tasks else [])):
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


PRIVATE_PREFIX = "gradient-conformance-impl-"


def private_folder() -> str:
    """A private folder for one implementation process, named after this process, so that
    one a killed suite left (SIGKILL ends it before it can remove anything) is removed by the
    next start on this machine (`remove_stale`)."""
    remove_stale()
    return tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-")


def remove_stale() -> None:
    """The private folders and control groups of suites that are no longer running (their
    pid in the name is gone), this user's only."""
    root = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            pid = _owner_pid(entry.name, PRIVATE_PREFIX)
            with contextlib.suppress(OSError):
                if pid and not _running(pid) and entry.is_dir(follow_symlinks=False) and \
                        entry.stat(follow_symlinks=False).st_uid == os.getuid():
                    shutil.rmtree(entry.path, ignore_errors=True)
    kernel.remove_stale_cgroups(lambda name: (pid := _owner_pid(name, kernel.CGROUP_PREFIX))
                                and not _running(pid))


def _owner_pid(name: str, prefix: str) -> int:
    head = name[len(prefix):].split("-")[0] if name.startswith(prefix) else ""
    return int(head) if head.isdigit() else 0


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
