"""The embedded stack's state folder: private modes (the folder 0700, SQLite's files 0600, the WAL
SQLite makes included), one holder of its lock at a time, and ports already listened on."""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
from pathlib import Path

import pytest

from agentstream_stack.state_dir import LOCK_FILE, StateDirBusy, busy_port, locked, private_dir, private_sqlite


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_folder_is_made_private_and_an_open_one_is_closed(tmp_path):
    assert mode(private_dir(tmp_path / "new" / ".agentstream")) == 0o700
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    os.chmod(old, 0o755)  # whatever the umask
    assert mode(private_dir(old)) == 0o700


def test_a_new_database_and_the_wal_sqlite_makes_for_it_are_0600(tmp_path):
    path = private_sqlite(f"sqlite+aiosqlite:///{tmp_path}/agentstream.db")
    assert path == tmp_path / "agentstream.db" and mode(path) == 0o600
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (1)")
        assert mode(tmp_path / "agentstream.db-wal") == 0o600 and mode(tmp_path / "agentstream.db-shm") == 0o600
    db.close()


def test_an_existing_database_and_its_wal_are_closed_too(tmp_path):
    for name in ("agentstream.db", "agentstream.db-wal"):
        (tmp_path / name).write_bytes(b"")
        os.chmod(tmp_path / name, 0o644)
    private_sqlite(f"sqlite:///{tmp_path}/agentstream.db")
    assert mode(tmp_path / "agentstream.db") == mode(tmp_path / "agentstream.db-wal") == 0o600


@pytest.mark.parametrize(
    "url", ["postgresql+asyncpg://u@127.0.0.1/db", "sqlite+aiosqlite://", "sqlite+aiosqlite:///:memory:"]
)
def test_other_databases_are_left_alone(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert private_sqlite(url) is None and list(tmp_path.iterdir()) == []


def test_one_holder_of_the_lock_at_a_time_and_the_busy_one_names_the_holder(tmp_path):
    # flock belongs to an open file: a second open in this process contends like another process.
    with locked(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n" and mode(tmp_path / LOCK_FILE) == 0o600
        with pytest.raises(StateDirBusy) as busy, locked(tmp_path):
            pass
        assert busy.value.pid == os.getpid()
        assert str(busy.value) == f"another `agentstream up` is running in {tmp_path} (pid {os.getpid()})"
    with locked(tmp_path):  # released with its file
        pass


def test_a_port_something_listens_on_is_named_and_free_ones_are_not():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        taken = listening.getsockname()[1]
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            free = spare.getsockname()[1]
        assert busy_port("127.0.0.1", [free, taken]) == taken
        assert busy_port("127.0.0.1", [free]) is None


def test_the_state_file_is_read_whole_while_it_is_written(tmp_path):
    """`up` writes stack.json while `send`, `doctor` or a test may read it: written in place, a reader
    found it empty (e2e `test_cli_finds_up`, load ~9)."""
    import threading

    from agentstream_stack.embedded import _write_state, read_state

    state_file = tmp_path / ".agentstream" / "stack.json"
    state = {"services": {f"service-{i}": f"http://127.0.0.1:{8000 + i}" for i in range(200)}}
    _write_state(state_file, state)
    done = threading.Event()

    def writer() -> None:
        for n in range(300):
            _write_state(state_file, {**state, "n": n})
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    reads = 0
    while not done.is_set():
        assert read_state(state_file) is not None
        reads += 1
    thread.join()
    assert reads > 0 and read_state(state_file) == {**state, "n": 299}
    assert [p.name for p in state_file.parent.iterdir()] == ["stack.json"]  # no temporary file left
