"""Two of Linux's own bounds on the implementation's processes, beside the sandbox:
docs/isolation.md, "What the sandbox shares with the host".

- A seccomp filter (bubblewrap's `--seccomp FD`) that refuses the kernel's keyrings
  (`add_key`, `request_key`, `keyctl`: the session keyring is the host's, namespaces do not
  make a new one) and new user namespaces (`unshare` or `clone` with CLONE_NEWUSER, and
  `clone3`, whose flags a filter cannot read: the C library then falls back to `clone`).
- A control group, where this process may make one (as root, in CI): memory (what the
  process's own limit does not count: page cache, shared memory, memfds, tmpfs) and tasks
  (processes and threads) of the whole tree bounded, whatever it maps or frees.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import struct
from dataclasses import dataclass

# --- seccomp --------------------------------------------------------------------------------

# Classic BPF: a load, a jump or a return, each (code, jump if true, jump if false, k).
_LOAD_WORD, _JUMP_EQUAL, _JUMP_SET, _RETURN = 0x20, 0x15, 0x45, 0x06
_ALLOW, _ERRNO, _KILL = 0x7FFF0000, 0x00050000, 0x80000000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (the low half of arg 0)
CLONE_NEWUSER = 0x10000000
X32_BIT = 0x40000000
# Per audit architecture: the keyring calls, the calls whose first argument holds clone
# flags (unshare, clone), and clone3. From each architecture's syscall table.
ARCHITECTURES = {
    "x86_64": {0xC000003E: ((248, 249, 250), (272, 56), 435),
               0x40000003: ((286, 287, 288), (310, 120), 435)},  # i386 through int 0x80
    "aarch64": {0xC00000B7: ((217, 218, 219), (97, 220), 435)},
}


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture, as the bytes of its `sock_filter` array;
    None where the architecture is not known here (the sandbox then goes without it, and the
    run says so). A call from another architecture than the machine's is killed, so that
    no other table of numbers gets past."""
    tables = ARCHITECTURES.get(machine or platform.machine())
    if tables is None:
        return None
    # Instructions, and labels (a name alone) where a jump lands; jumps name their label.
    code: list = [(_LOAD_WORD, 0, 0, _ARCH)]
    code += [(_JUMP_EQUAL, f"arch {arch}", 0, arch) for arch in tables]
    code.append((_RETURN, 0, 0, _KILL))
    for arch, (keyrings, flagged, clone3) in tables.items():
        code += [f"arch {arch}", (_LOAD_WORD, 0, 0, _NR)]
        if arch == 0xC000003E:  # the x32 ABI's numbers: nothing here needs them
            code.append((_JUMP_SET, "refuse", 0, X32_BIT))
        code += [(_JUMP_EQUAL, "refuse", 0, number) for number in keyrings]
        code.append((_JUMP_EQUAL, "no such call", 0, clone3))
        code += [(_JUMP_EQUAL, f"flags {arch}", 0, number) for number in flagged]
        code += [(_RETURN, 0, 0, _ALLOW), f"flags {arch}", (_LOAD_WORD, 0, 0, _ARG0),
                 (_JUMP_SET, "refuse", 0, CLONE_NEWUSER), (_RETURN, 0, 0, _ALLOW)]
    code += ["refuse", (_RETURN, 0, 0, _ERRNO | errno.EPERM),
             "no such call", (_RETURN, 0, 0, _ERRNO | errno.ENOSYS)]
    return b"".join(struct.pack("<HBBI", *row) for row in _assembled(code))


def _assembled(code: list) -> list[tuple[int, int, int, int]]:
    """The instructions, each named jump as the count of instructions it skips (classic BPF
    jumps forward only, at most 255)."""
    where, index = {}, 0
    for row in code:
        if isinstance(row, str):
            where[row] = index
        else:
            index += 1
    out: list[tuple[int, int, int, int]] = []
    for row in code:
        if isinstance(row, str):
            continue
        op, *jumps, k = row
        skips = [where[j] - len(out) - 1 if isinstance(j, str) else j for j in jumps]
        if any(not 0 <= n < 256 for n in skips):
            raise ValueError(f"seccomp: a jump out of reach at instruction {len(out)}")
        out.append((op, skips[0], skips[1], k))
    return out


# --- control groups -------------------------------------------------------------------------

CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_PREFIX = "gradient-conformance-"  # then the suite's pid, then the process's token
TASK_LIMIT = 1024  # processes and threads of one implementation's tree at once


def tasks_of(uid: int) -> int:
    """The tasks (processes and threads) that run as `uid` now, as Linux's RLIMIT_NPROC
    counts them (by real uid); 0 where /proc does not say."""
    count = 0
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{name}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if ":" in line)
                if int(fields["Uid"].split()[0]) == uid:
                    count += int(fields["Threads"])
    return count


def _own_cgroup(controller: str | None) -> str | None:
    """This process's control group for `controller` (None: the unified hierarchy), as a
    path under CGROUP_ROOT; None where there is none."""
    with contextlib.suppress(OSError):
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, names, path = line.rstrip("\n").split(":", 2)
                if (controller is None and names == "") or controller in names.split(","):
                    base = CGROUP_ROOT if controller is None else f"{CGROUP_ROOT}/{controller}"
                    if controller is None and os.path.isdir(f"{CGROUP_ROOT}/unified") and \
                            not os.path.exists(f"{CGROUP_ROOT}/cgroup.controllers"):
                        base = f"{CGROUP_ROOT}/unified"
                    return base + path.rstrip("/")
    return None


@dataclass
class Cgroup:
    """One implementation process's control groups: `folders` to join (each written the
    joining process's pid), and what each bounds."""

    folders: tuple[str, ...]
    memory: str | None = None  # the folder whose events say the memory limit was met
    version: int = 1
    tasks: bool = False  # whether the tasks are bounded too

    def join(self) -> None:
        """In the started process, before it runs anything: into every group."""
        pid = str(os.getpid())
        for folder in self.folders:
            with open(f"{folder}/cgroup.procs", "w") as f:
                f.write(pid)

    def memory_kills(self) -> int:
        """How many times the kernel killed a process of the group for its memory limit."""
        if self.memory is None:
            return 0
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError, ValueError):
            with open(f"{self.memory}/{name}") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        return 0

    def remove(self) -> None:
        for folder in self.folders:
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def make_cgroup(name: str, memory_limit: int) -> Cgroup | None:
    """Groups below this process's own, named `name`, bounding memory to `memory_limit` and
    (where the pids controller is there) tasks to TASK_LIMIT; None where no memory group can
    be made (an unprivileged user, no controller), which the caller says."""
    unified = _own_cgroup(None)
    controllers = ""
    with contextlib.suppress(OSError):
        with open(f"{unified}/cgroup.controllers") as f:
            controllers = f.read()
    if unified and "memory" in controllers.split():
        folder = f"{unified}/{name}"
        try:
            os.mkdir(folder)
            _write(folder, "memory.max", memory_limit)
            _write(folder, "memory.swap.max", 0, required=False)
            _write(folder, "pids.max", TASK_LIMIT, required=False)
        except OSError:
            Cgroup((folder,)).remove()
            return None
        return Cgroup((folder,), memory=folder, version=2,
                      tasks=os.path.exists(f"{folder}/pids.max"))
    memory, pids = _own_cgroup("memory"), _own_cgroup("pids")
    if memory is None:
        return None
    made = [f"{memory}/{name}"]
    try:
        os.mkdir(made[0])
        _write(made[0], "memory.limit_in_bytes", memory_limit)
        _write(made[0], "memory.memsw.limit_in_bytes", memory_limit, required=False)
    except OSError:
        Cgroup(tuple(made)).remove()
        return None
    tasks = False
    if pids is not None:
        with contextlib.suppress(OSError):
            os.mkdir(f"{pids}/{name}")
            made.append(f"{pids}/{name}")
            _write(made[-1], "pids.max", TASK_LIMIT)
            tasks = True
    return Cgroup(tuple(made), memory=made[0], version=1, tasks=tasks)


def remove_stale_cgroups(stale) -> None:
    """Remove the (empty) groups beside this process's own groups whose name `stale` says
    are a finished suite's: left by one killed before it could remove them."""
    for controller in (None, "memory", "pids"):
        base = _own_cgroup(controller)
        if base is None:
            continue
        with contextlib.suppress(OSError):
            for entry in os.scandir(base):
                if entry.is_dir(follow_symlinks=False) and \
                        entry.name.startswith(CGROUP_PREFIX) and stale(entry.name):
                    with contextlib.suppress(OSError):
                        os.rmdir(entry.path)


def _write(folder: str, name: str, value: int, *, required: bool = True) -> None:
    try:
        with open(f"{folder}/{name}", "w") as f:
            f.write(str(value))
    except OSError:
        if required:
            raise
