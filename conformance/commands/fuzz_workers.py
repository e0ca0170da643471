"""Where a fuzz run's cases run: the suite's own pytest session, its test loop replaced by a
`FuzzLoop`, in K processes on this machine (`in_processes`) or as tasks on a Dask cluster
(`on_cluster`). docs/fuzzing.md, "Fuzzing" and "Fuzzing on a cluster".

Both hand every message of their sessions to `take` as it comes back, and call `tick` about
once a second, so the driver (commands/fuzz.py) keeps the store, the progress line and the
report the same way whichever runs the cases. A message is a tuple: who sent it (a process's
or a task's number), its kind ("checks", "hello", "record", "done", "failed"), its body.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import secrets
import signal
import stat
import subprocess
import sys
import time
from multiprocessing.connection import wait

import pytest

from gradient_conformance.conformance import collection, options, plugin
from gradient_conformance.reports.records import loads

# What a task may take beyond its seconds before it is stopped: starting the interpreter,
# the suite and the implementation, and the last batch under way.
TASK_GRACE = 120.0
STOP_GRACE = 10.0  # past a run's deadline, before its sessions are stopped
KINDS = ("checks", "hello", "record", "done", "failed", "note")
# A task's results come back only when it ends, and it may start late on a busy worker.
CLUSTER_GRACE = 60.0
MESSAGE_BYTES = 64 << 20  # one message (a check's record) at most
# The task's process: the suite's session, told what to do by one JSON line on stdin.
_TASK_MAIN = "from gradient_conformance.conformance.commands.fuzz_workers import task_main; " \
    "task_main()"


VALUE_BYTES = 64 << 10  # a database value larger than this is left out when read
VALUES_PER_KEY = 500  # values read back per key; the rest are left out, counted


def open_database(spec: str | None):
    """A Hypothesis example database from `--database`: none, redis://..., or a folder,
    read through `bounded`."""
    return None if spec is None or spec == "none" else bounded(_database(spec))


def bounded(inner):
    """`inner`, its values read back only up to VALUE_BYTES each: a database is shared (a
    folder, a Redis server), and what it holds is data, not trusted. Hypothesis's reader
    takes time quadratic in a junk value's size (a 1 MiB value of 0xff bytes cost a run
    minutes); a value Hypothesis wrote is far smaller. And only VALUES_PER_KEY values of a
    key are read: a store filled with values just under the size cut would take the whole
    run to replay (Hypothesis keeps a few dozen per check). The count of values left out is
    `skipped` on the database returned."""
    from hypothesis.database import ExampleDatabase

    class Bounded(ExampleDatabase):
        def __init__(self):
            super().__init__()
            self.skipped = 0

        def fetch(self, key: bytes):
            read = 0
            for value in inner.fetch(key):
                if read < VALUES_PER_KEY and isinstance(value, bytes | bytearray) and \
                        len(value) <= VALUE_BYTES:
                    read += 1
                    yield value
                else:
                    self.skipped += 1

        def save(self, key: bytes, value: bytes) -> None:
            inner.save(key, value)

        def delete(self, key: bytes, value: bytes) -> None:
            inner.delete(key, value)

        def move(self, src: bytes, dest: bytes, value: bytes) -> None:
            inner.move(src, dest, value)

    return Bounded()


def _database(spec: str):
    if spec.startswith("redis://"):
        try:
            import redis
        except ImportError:
            raise ValueError("--database redis://... needs the redis package: pip install "
                             "'gradient-conformance[redis]'") from None
        from hypothesis.extra.redis import RedisExampleDatabase
        return RedisExampleDatabase(redis.Redis.from_url(spec))
    return _folder_database(spec)


def _folder_database(spec: str):
    """Hypothesis's folder database, read as data (docs/isolation.md, "The suite's own
    inputs"): a value is read only if it is a regular file (not a link, a FIFO or a device)
    of at most VALUE_BYTES; the others are left for `bounded` to count."""
    from hypothesis.database import DirectoryBasedExampleDatabase

    class Folder(DirectoryBasedExampleDatabase):
        def fetch(self, key: bytes):
            folder = self._key_path(key)
            try:
                names = os.listdir(folder) if folder.is_dir() and not folder.is_symlink() \
                    else []
            except OSError:
                return
            for name in names:
                try:
                    descriptor = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW |
                                         os.O_NONBLOCK)
                except OSError:
                    yield None  # counted as left out
                    continue
                with os.fdopen(descriptor, "rb") as f:
                    found = os.fstat(f.fileno())
                    yield f.read(VALUE_BYTES + 1) if stat.S_ISREG(found.st_mode) and \
                        found.st_size <= VALUE_BYTES else None
    return Folder(spec)


class FuzzLoop:
    """A pytest plugin that runs the suite's session as a fuzzer: it keeps the generated
    checks (those Hypothesis drives) and, in place of pytest's test loop, runs them in turn,
    a batch of examples each, until `deadline` (or for `rounds` batches each), sending each
    check's record through `send`. It also stops when the process that started it is gone
    (`parent`), so a task whose Dask worker was killed does not run on unseen."""

    def __init__(self, send, *, deadline: float, batch: int, rounds: int | None,
                 database: str | None, checks: list[str] | None, parent: int | None = None):
        self.send, self.deadline, self.batch, self.rounds = send, deadline, batch, rounds
        self.database, self.checks, self.parent = database, checks, parent
        self.running = None  # the check being run, whose record the suite's hook sends
        self.skipped: set = set()  # checks that skipped: not run again

    def _going(self) -> bool:
        return time.time() < self.deadline and self.parent in (None, os.getppid())

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        generated = [i for i in items if collection.is_check(i) and collection.is_generated(i)]
        items[:] = [i for i in generated if not self.checks or collection.check_name(i) in
                    self.checks]
        # The checks this session runs, not all it collected: the driver warns of each that
        # ran no case, and one not asked for was not expected to.
        self.send("checks", sorted({collection.check_name(i) for i in items}))

    # The suite's own hooks (options.Hooks).

    def pytest_gradient_conformance_keep_cases(self):
        return False  # the driver keeps the store

    def pytest_gradient_conformance_loaded(self, implementation):
        self.send("hello", implementation)

    def pytest_gradient_conformance_record(self, record):
        self.send("record", record)
        if record["outcome"] == "skipped" and self.running is not None:
            self.skipped.add(self.running)

    def pytest_runtestloop(self, session):
        from hypothesis import HealthCheck, Phase, Verbosity, settings

        # Quiet: the falsifying examples are in the records, not on the terminal.
        database = open_database(self.database)
        base = settings(settings.get_profile("default"), max_examples=self.batch,
                        deadline=None, derandomize=False,
                        database=database, verbosity=Verbosity.quiet,
                        print_blob=False, suppress_health_check=list(HealthCheck))
        generating = settings(base, phases=[Phase.generate, Phase.target, Phase.shrink])
        # The next batch looks again: a failing check's own further looks would only
        # spend the batch's time.
        run = session.config.stash.get(plugin.RUN_KEY, None)
        if run is not None:
            run.more_looks = 0
        # Each check is given afresh from its inner test (the same database key as under
        # pytest): once with the database's replay, for the first batch, and once
        # generating only, for the rest.
        batches = {item: [options.generated_with(item.obj, base),
                          options.generated_with(item.obj, generating)]
                   for item in session.items}
        rounds = self.rounds
        while batches and self._going() and rounds != 0:
            rounds = None if rounds is None else rounds - 1
            for item in list(batches):
                if not self._going():
                    break
                item.obj = batches[item][0]
                batches[item][:] = batches[item][-1:]
                self.running = item
                item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
                self.running = None
                if item in self.skipped:
                    batches.pop(item, None)
        if database is not None and database.skipped:
            self.send("note", f"{database.skipped} values of the Hypothesis database were "
                      f"left out, not replayed: larger than {VALUE_BYTES >> 10} KiB, past the "
                      f"first {VALUES_PER_KEY} of a key, or no regular file (a FIFO, a link): "
                      "not what Hypothesis writes (docs/fuzzing.md, \"Fuzzing\")")
        return True


def session(arguments: list[str], loop: dict, send) -> int:
    """One fuzzing session, the suite's pytest session with a FuzzLoop; its exit status.
    pytest's own terminal lines go nowhere: the driver shows progress."""
    with open(os.devnull, "w") as quiet:
        os.dup2(quiet.fileno(), 1)
    return int(pytest.main(arguments, plugins=[FuzzLoop(send, **loop)]))


# --- on this machine ---------------------------------------------------------------------


def _process(worker: int, arguments: list[str], loop: dict, channel, nonce: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides when to stop
    code = 3

    def send(*message):
        channel.send_bytes(json.dumps([nonce, *message]).encode())

    try:
        code = session(arguments, loop, send)
    finally:
        send("done", code)


def in_processes(jobs: int, arguments: list[str], loop: dict, take, tick, *,
                 target=None) -> None:
    """Run the sessions in `jobs` processes of this machine until each is done, or until
    the run's deadline and STOP_GRACE more (then they are stopped, and a "failed" message
    says so). Messages come back as JSON bytes, never pickles, each carrying the run's
    nonce: a process the implementation started that writes into a session's pipe can
    neither run code in the driver nor pass for the session unless it read the nonce."""
    context = multiprocessing.get_context("spawn")
    nonce = secrets.token_hex(16)
    channels = [context.Pipe(duplex=False) for _ in range(jobs)]
    workers = [context.Process(target=target or _process, daemon=True,
                               args=(k, arguments, {**loop, "parent": os.getpid()},
                                     channels[k][1], nonce))
               for k in range(jobs)]
    open_ = {channels[k][0]: k for k in range(jobs)}
    finished: set[int] = set()
    try:
        for w in workers:
            w.start()
        for _, sending in channels:
            sending.close()
        while len(finished) < jobs and open_:
            if time.time() > loop["deadline"] + STOP_GRACE:
                for k, w in enumerate(workers):
                    if w.is_alive():
                        take((k, "failed", f"still running {STOP_GRACE:.0f} s after the "
                              "run's deadline, and stopped"))
                break
            for ready in wait(list(open_), timeout=1.0):
                reader = next(r for r in open_ if r is ready)  # the Connection waited on
                k = open_[reader]
                try:
                    data = reader.recv_bytes(MESSAGE_BYTES)
                except (EOFError, OSError) as problem:
                    del open_[reader]
                    if k not in finished:
                        take((k, "failed", "its session ended without saying it was done"
                              + (f" ({problem})" if str(problem) else "")))
                    continue
                message = _message(k, data, nonce)
                if message is not None:
                    if message[1] == "done":
                        finished.add(k)
                    take(message)
            tick()
    finally:
        for w in workers:
            if w.is_alive():
                w.kill()
        for reader in open_:
            reader.close()


def _message(sender: int, data: bytes, nonce: str) -> tuple | None:
    """A session's message, if it is one: JSON, a list, the run's nonce, a known kind."""
    try:
        message = loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(message, list) or len(message) < 2 or message[0] != nonce or \
            message[1] not in KINDS:
        return None
    return (sender, *message[1:])


# --- on a Dask cluster -------------------------------------------------------------------


def run_task(number: int, arguments: list[str], loop: dict, seconds: float, cwd: str) -> list:
    """One task of a cluster run, on a Dask worker: a session for `seconds`, in a process of
    its own (a crash of the implementation, or of pytest, is the task's alone), in the
    driver's folder where this machine has it. Its messages, as the session sent them; a
    session that could not start adds its stderr as a "failed" message."""
    nonce = secrets.token_hex(16)
    task = {"arguments": arguments, "loop": {**loop, "deadline": time.time() + seconds},
            "nonce": nonce}
    try:
        # PYTHONSAFEPATH: `-c` would put the driver's folder first on the task's import path
        done = subprocess.run([sys.executable, "-c", _TASK_MAIN], input=json.dumps(task),
                              capture_output=True, text=True, timeout=seconds + TASK_GRACE,
                              cwd=cwd if os.path.isdir(cwd) else None,
                              env={**os.environ, "PYTHONSAFEPATH": "1"})
        out, err, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as late:
        out, err, code = _text(late.stdout), _text(late.stderr), None
    messages = []
    for line in out.splitlines():  # a line cut short by a kill, or not the session's: left
        message = _message(number, line.encode(), nonce)
        if message is not None:
            messages.append(message)
    if code is None:
        messages.append((number, "failed", f"the task ran past its {seconds:.0f} s and "
                         f"{TASK_GRACE:.0f} s more, and was stopped"))
    elif not any(m[1] == "done" for m in messages) or code not in (0, 1, 5):
        messages.append((number, "failed", f"exit {code}: {err.strip()[-2000:]}"))
    return messages


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def task_main() -> None:
    """The task's process: the session, its messages one JSON line each on stdout (pytest's
    own output goes nowhere), the last one "done" with the exit status."""
    task = json.loads(sys.stdin.readline())
    out = os.fdopen(os.dup(1), "w")

    def send(*message):
        out.write(json.dumps([task["nonce"], *message]) + "\n")
        out.flush()

    code = 3
    try:
        code = session(task["arguments"], {**task["loop"], "parent": os.getppid()}, send)
    finally:
        send("done", code)


def connect(scheduler: str):
    """A Dask client of the scheduler at `scheduler`, once a worker has joined it; ValueError
    if it cannot be reached, or no worker joins, in a minute."""
    from distributed import Client
    _reachable(scheduler)
    try:
        client = Client(scheduler, timeout=20)
    except OSError as problem:
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler}: {problem}") from None
    try:
        client.wait_for_workers(1, timeout=60)
    except TimeoutError:
        client.close()
        raise ValueError(f"no Dask worker joined the scheduler at {scheduler} in 60 s") \
            from None
    return client


def _reachable(scheduler: str) -> None:
    """ValueError at once when nothing listens at a tcp:// address: Dask's client would
    retry a refused connection for its whole timeout before saying so."""
    import socket
    from urllib.parse import urlsplit
    try:
        parts = urlsplit(scheduler)
        host, port = parts.hostname, parts.port
    except ValueError as problem:
        raise ValueError(f"{scheduler!r} is not a scheduler's address (tcp://HOST:PORT): "
                         f"{problem}") from None
    if parts.scheme != "tcp" or host is None or port is None:
        return  # another transport: Dask's client says what it needs
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as problem:
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler}: "
                         f"{problem.strerror or problem}") from None


def on_cluster(client, arguments: list[str], loop: dict, take, tick, *, task_seconds: float,
               log, tasks: int | None = None) -> None:
    """Run the sessions as tasks of at most `task_seconds` on the Dask cluster of `client`
    (`connect`), as many at once as its workers have threads, until the run's deadline, or
    (`tasks`) until that many tasks have ended: a run sized in cases, each task running the
    loop's rounds. Each task's messages go to `take` when it ends. A worker lost mid-task
    loses only that task's messages: Dask runs the task again elsewhere. Closes the
    client."""
    deadline = loop["deadline"]
    pending: dict = {}
    number = 0
    try:
        while time.time() < deadline + CLUSTER_GRACE:
            # nthreads() counts every worker; scheduler_info() lists only the first few.
            threads = sum(client.nthreads().values())
            left = deadline - time.time()
            while len(pending) < max(threads, 1) and left > 1.0 and \
                    (tasks is None or number < tasks):
                future = client.submit(run_task, number, arguments, loop,
                                       min(task_seconds, left), os.getcwd(), pure=False,
                                       key=f"gradient-conformance-fuzz-{os.getpid()}-{number}")
                pending[future] = number
                number += 1
            if not pending:
                break
            for future in [f for f in pending if f.done()]:
                task = pending.pop(future)
                if future.status == "finished":
                    for message in future.result():
                        take(message)
                else:
                    print(f"task {task} lost: {future.exception()!r}", file=log, flush=True)
            tick()
            time.sleep(0.5)
        else:
            print(f"{len(pending)} tasks still running {CLUSTER_GRACE:.0f} s after the run's "
                  "deadline: cancelled, their cases lost", file=log, flush=True)
    finally:
        for future in pending:
            future.cancel()
        client.close()
