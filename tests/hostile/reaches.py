"""Wrong (the last bit of every f32 flipped), and at import it tries the ways through of the
fifth round of probes (issue 54): what lies near it in its project (HOSTILE_PROJECT: a
token in .git/config, deploy/.env, a log beside the project), the host's /tmp
(HOSTILE_TMP_MARK, a file there) and a Unix socket there and one in its own folder
(HOSTILE_SOCKETS), the session keyring, a key added to it, the host's /dev/null and a file
of /sys only root may read (as their owner, root outside), a user namespace of its own, and
1,500 threads. What it managed it says in its VERSION ("escaped: ..."); what held, too
("held: ...").
It is a package's __init__.py, its probes.py and last_bit_off.py (tests/impls/) beside it
(tests/test_contained_by_construction.py makes the package)."""

import ctypes
import os
import pathlib
import socket
import threading

from reaches.last_bit_off import build  # noqa: F401 - the wrong implementation it is
from reaches.probes import attempt as _try
from reaches.probes import said

NAME = "reaches"
_libc = ctypes.CDLL(None, use_errno=True)


def _call(result: int) -> int:
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


project = pathlib.Path(os.environ.get("HOSTILE_PROJECT", "/nonexistent"))
_try("git token", lambda: (project / ".git" / "config").read_text().strip()[-12:])
_try("deploy env", lambda: (project / "deploy" / ".env").read_text().strip())
_try("sibling log", lambda: (project.parent / "server.log").read_text().strip())
_try("host tmp", lambda: pathlib.Path(os.environ.get("HOSTILE_TMP_MARK", "/nonexistent"))
     .read_text().strip())


def _connect(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall(b"escaped\n")
    return True


for k, path in enumerate(filter(None, os.environ.get("HOSTILE_SOCKETS", "").split(":"))):
    _try(f"socket {k}", lambda path=path: _connect(path))
# keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0); add_key("user", ..., session)
_try("keyring", lambda: _call(_libc.syscall(250, 0, -3, 0)))
_try("add key", lambda: _call(_libc.syscall(248, b"user", b"hostile", b"planted", 7, -3)))
_try("dev null", lambda: os.chmod("/dev/null", 0o666))
_try("user namespace", lambda: _call(_libc.unshare(0x10000000)))


def _root_only() -> str | bool:
    """A file of /sys that only root may read (0400): read, it is root's outside too."""
    import glob
    found = [p for p in glob.glob("/sys/kernel/slab/*/total_objects")[:50]
             if os.stat(p).st_mode & 0o777 == 0o400]
    if not found:
        return False
    return pathlib.Path(found[0]).read_text().strip()[:20] or True


_try("root only", _root_only)


def _threads() -> str | bool:
    stop = threading.Event()
    started = []
    try:
        for _ in range(1500):
            thread = threading.Thread(target=stop.wait, daemon=True)
            thread.start()
            started.append(thread)
    except RuntimeError:
        pass
    finally:
        stop.set()
    return f"{len(started)} threads" if len(started) >= 1500 else False


_try("tasks", _threads)
VERSION = said()
