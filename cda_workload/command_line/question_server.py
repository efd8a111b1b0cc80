"""A resident process that answers ``al``'s questions without paying Python's imports again.

A question answered in process takes 0.3-0.5 s; starting Python and importing pyarrow,
pandas, DuckDB, sqlglot and this project takes 1.5 s more. The server imports them once and
forks a worker per question: the worker gets the client's argv, working folder, environment
and its stdin, stdout and stderr themselves (passed over a Unix socket), runs the same
``cli.main`` and sends back the exit status, so a served question prints and exits exactly as
an unserved one. Each question runs in a fresh fork: nothing one leaves behind reaches the
next, and the server itself never starts Spark or runs a query.

Only this user can reach the socket (a 0700 folder of their own); the request is the argv the
same parser reads, so nothing in it chooses code. The server stops after ``AL_SERVER_IDLE_S``
seconds without a question (900), when ``al server stop`` asks, and as soon as a source file
of the project changed since it started (that question then runs in process).

This module imports only the standard library at its top: the client side runs before any
of the heavy imports it exists to avoid.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

# the commands that read a store and answer: the ones worth serving (run, demo and bench
# start Spark and take seconds to minutes, so they run in process)
SERVED = frozenset({"lineage", "report", "export", "verify", "show", "runs"})
IDLE_S = 900.0
_PACKAGES = ("cda_workload", "tracing", "materialization", "segmenter", "reasoning_udfs", "models")
# imported once by the server, so a question's worker starts with them loaded
_PRELOAD = (
    "cda_workload.command_line.cli",
    "tracing.present",
    "tracing.present.report",
    "tracing.present.openlineage_event",
    "tracing.session",
    "pyarrow.dataset",
    "pyarrow.compute",
    "pyarrow.parquet",
    "pandas",
    "duckdb",
    "rich.console",
)
_HEADER = struct.Struct("!I")
_SOCKET_PATH_MAX = 108  # sun_path's size on Linux, its terminating NUL included


def socket_path() -> Path:
    """One server per Python environment and checkout, in a folder only this user can enter."""
    root = Path(__file__).resolve().parents[2]
    tag = hashlib.sha256(f"{sys.prefix}\0{root}".encode()).hexdigest()[:12]
    place = Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp") / f"al-server-{os.getuid()}" / f"{tag}.sock"
    if len(os.fsencode(place)) >= _SOCKET_PATH_MAX:  # too long for a Unix socket's address
        place = Path("/tmp") / place.parent.name / place.name
    return place


def _private_folder(folder: Path, create: bool) -> bool:
    """The socket's folder exists (made if asked), is this user's and no one else's."""
    if create:
        folder.mkdir(mode=0o700, exist_ok=True)
    try:
        st = folder.stat()
    except FileNotFoundError:
        return False
    return st.st_uid == os.getuid() and st.st_mode & 0o077 == 0


def wanted(argv: list[str]) -> bool:
    """Whether ``argv`` is a question a server may answer (``AL_SERVER=off`` turns serving off)."""
    if os.environ.get("AL_SERVER", "auto") == "off":
        return False
    command = next((a for a in argv if not a.startswith("-")), None)
    return command in SERVED


# -- the client: the ``al`` process the user started ----------------------------------------


def ask(argv: list[str]) -> int | None:
    """Have a running server answer ``argv``: its exit status, or None where no server answered
    (none running, another user's socket, or a server older than the code: ask in process)."""
    path = socket_path()
    if not _private_folder(path.parent, create=False):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(conn, [b"R" + _HEADER.pack(len(request))], [0, 1, 2])
        conn.sendall(request)
        reply = _Replies(conn)
        kind, pid = reply.next()
        if kind != b"P":  # S: the server is stale and stops
            return None
    except OSError:
        return None
    while True:
        try:
            kind, value = reply.next()
        except KeyboardInterrupt:  # Ctrl-C reaches this process only: pass it to the worker
            os.kill(pid, signal.SIGINT)
            continue
        except OSError:
            kind, value = b"", 0
        if kind == b"X":
            return value
        print("al: error: the question's worker ended without an answer", file=sys.stderr)
        return 1


class _Replies:
    """The server's replies: one kind byte and a 4-byte number each (P pid, X exit status)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn

    def next(self) -> tuple[bytes, int]:
        data = b""
        while len(data) < 1 + _HEADER.size:
            chunk = self.conn.recv(1 + _HEADER.size - len(data))
            if not chunk:
                return (b"S", 0) if not data else (b"", 0)
            data += chunk
        return data[:1], _HEADER.unpack(data[1:])[0]


def control(command: str) -> dict[str, Any] | None:
    """``status`` or ``stop`` of this environment's server: what it says, or None if none runs."""
    path = socket_path()
    if not _private_folder(path.parent, create=False):
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(str(path))
            conn.sendall(b"Q" if command == "stop" else b"?")
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
        except OSError:
            return None
    return json.loads(data) if data else None


def start_detached() -> None:
    """Start a server in its own session, its output in a log beside the socket; returns at once."""
    import subprocess

    path = socket_path()
    _private_folder(path.parent, create=True)
    with open(path.with_suffix(".log"), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "cda_workload.command_line.question_server"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**os.environ, "AL_SERVER": "off"},  # its own questions never ask a server
        )


# -- the server ------------------------------------------------------------------------------


def serve(idle_s: float | None = None) -> int:
    """Listen until idle for ``idle_s`` seconds, asked to stop, or the code changed."""
    import fcntl
    import importlib

    path = socket_path()
    if not _private_folder(path.parent, create=True):
        print(f"al server: {path.parent} is not a folder of this user's alone", file=sys.stderr)
        return 2
    idle_s = float(os.environ.get("AL_SERVER_IDLE_S", IDLE_S)) if idle_s is None else idle_s
    lock = open(path.with_suffix(".lock"), "w")  # noqa: SIM115 (held for the server's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another server of this environment is starting or running
    before = dict(os.environ)
    for module in _PRELOAD:
        importlib.import_module(module)
    # what the imports set (e.g. models/paths.py's offline switches) a worker keeps
    added = {k: v for k, v in os.environ.items() if k not in before}
    sources = _sources()
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    listener.settimeout(idle_s)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    started = time.time()
    served = 0
    print(f"al server: pid {os.getpid()} listening on {path}", flush=True)
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                print(f"al server: no question for {idle_s:g} s: stopping", flush=True)
                return 0
            conn.settimeout(None)
            # the descriptors come with the message's first byte: read them with it
            message, fds, _, _ = socket.recv_fds(conn, 1 + _HEADER.size, 3)
            kind = message[:1]
            with conn:
                if kind == b"R" and len(fds) == 3:
                    if _changed(sources):
                        conn.sendall(b"S" + _HEADER.pack(0))
                        print("al server: the project's code changed: stopping", flush=True)
                        return 0
                    served += 1
                    if os.fork() == 0:
                        listener.close()
                        _work(conn, message[1:], fds, added)  # never returns
                elif kind in (b"?", b"Q"):
                    state = {"pid": os.getpid(), "socket": str(path), "started": started,
                             "idle_s": idle_s, "questions": served}  # fmt: skip
                    conn.sendall(json.dumps(state).encode())
                    if kind == b"Q":
                        print("al server: asked to stop", flush=True)
                        return 0
                for fd in fds:
                    os.close(fd)
    finally:
        listener.close()
        path.unlink(missing_ok=True)


def _work(conn: socket.socket, header: bytes, fds: list[int], added: dict[str, str]) -> None:
    """In the forked worker: become the client's ``al`` process, answer, report the status."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # its own subprocesses are waited for
        (size,) = _HEADER.unpack(_received(conn, _HEADER.size, header))
        request = _received(conn, size)
        asked = json.loads(request)
        conn.sendall(b"P" + _HEADER.pack(os.getpid()))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(asked["cwd"])
        os.environ.clear()
        os.environ.update({**added, **asked["env"]})
        _reopen_standard_streams()
        from cda_workload.command_line.cli import main

        try:
            code = main(asked["argv"])
        except SystemExit as done:  # argparse's --help and usage errors
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        conn.sendall(b"X" + _HEADER.pack(code))
    finally:
        os._exit(code)


def _received(conn: socket.socket, size: int, data: bytes = b"") -> bytes:
    """``size`` bytes from ``conn`` (``data`` already read); an asker gone before it sent them
    all ends the worker instead of leaving it reading an empty socket forever."""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the asker closed the connection mid-request")
        data += chunk
    return data


def _reopen_standard_streams() -> None:
    """Text streams over the client's descriptors, buffered as Python would buffer them there."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        old = getattr(sys, name)
        line = mode == "w" and (unbuffered or fd == 2 or os.isatty(fd))
        buffering = 1 if line else -1
        stream = open(fd, mode, buffering, old.encoding, old.errors, closefd=False)  # noqa: SIM115
        setattr(sys, name, stream)


def _sources() -> dict[str, int]:
    """Modification times of the project's loaded modules: a changed one retires the server."""
    found = {}
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        file = getattr(module, "__file__", None)
        if file and name.split(".", 1)[0] in _PACKAGES:
            found[file] = os.stat(file).st_mtime_ns
    return found


def _changed(sources: dict[str, int]) -> bool:
    for file, mtime in sources.items():
        try:
            if os.stat(file).st_mtime_ns != mtime:
                return True
        except FileNotFoundError:
            return True
    return False


if __name__ == "__main__":
    sys.exit(serve())
