"""The embedded stack's state folder (`.agentstream/`): private to its user, one `agentstream up` at a time.

It holds the SQLite database, the web session secret, the logs and the running stack's address,
so the folder is 0700 and the database files 0600 (SQLite gives its `-wal`/`-shm` files the
database's mode). A second `up` in the same folder would share the database and replace the
first's web keys on its way up, and its services would find the first's ports taken: `up` takes
an exclusive `flock` on `up.lock` for its whole life (the kernel drops it when the process ends,
however it ends) and checks its ports before it touches anything.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

STATE_DIR = Path(".agentstream")
LOCK_FILE = "up.lock"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


class StateDirBusy(Exception):
    """Another process holds the state folder's lock."""

    def __init__(self, directory: Path, pid: int | None) -> None:
        self.directory, self.pid = directory, pid
        who = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(f"another `agentstream up` is running in {directory.resolve()} ({who})")


def private_dir(path: Path) -> Path:
    """`path` made (with its parents) and kept at mode 0700."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    _keep_mode(path, PRIVATE_DIR)
    return path


def private_sqlite(url: str) -> Path | None:
    """The SQLite file of `url` made (if missing) and kept at mode 0600, with its WAL and shared-memory
    files; None for any other database or an in-memory one."""
    parsed = make_url(url)
    database = parsed.database
    if not parsed.drivername.startswith("sqlite") or not database or database == ":memory:":
        return None
    if database.startswith("file:") or parsed.query.get("mode") == "memory":
        return None  # a URI filename: SQLite opens it as it says
    path = Path(database)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE))  # SQLite takes an empty file as a new database
    for file in (path, *(path.with_name(path.name + s) for s in SQLITE_COMPANIONS)):
        if file.exists():
            _keep_mode(file, PRIVATE_FILE)
    return path


def _keep_mode(path: Path, mode: int) -> None:
    if stat.S_IMODE(path.stat().st_mode) != mode:
        path.chmod(mode)


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold the state folder's lock while the block runs; `StateDirBusy` when another process holds it.

    The lock file stays (removing it would let a third process lock a new file while the second
    still holds the old one); it holds the holder's pid, for the message a second `up` prints.
    """
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateDirBusy(directory, _pid_in(fd)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the file drops the lock


def _pid_in(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None  # empty while the holder is between lock and write


def busy_port(host: str, ports: Iterable[int]) -> int | None:
    """The first of `ports` something already listens on at `host`, or None when every one is free.

    A bind with SO_REUSEADDR, as the services' servers bind: it fails only when a socket is
    bound there (not for connections lingering in TIME_WAIT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for port in ports:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    return port
                raise
    return None
