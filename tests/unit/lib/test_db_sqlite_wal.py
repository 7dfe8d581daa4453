"""A SQLite database is in WAL mode from its first migration on, even while other processes hold it.

In rollback mode a writer waiting to commit shuts out every reader: five service processes on one
file held each other over a minute and a service's start failed (fresh-clone `make test`, run 23).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

from agentstream.db.session import current_revisions, head_revisions, upgrade_sync


def _journal_mode(path: Path) -> str:
    """The mode the file itself records (a plain connection sets nothing)."""
    with closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


def test_a_fresh_database_is_migrated_in_wal_mode(tmp_path):
    path = tmp_path / "fresh.db"
    upgrade_sync(f"sqlite+aiosqlite:///{path}")
    assert _journal_mode(path) == "wal"
    assert current_revisions(f"sqlite+aiosqlite:///{path}") == head_revisions()


def test_a_rollback_mode_database_read_by_another_process_is_switched_when_it_lets_go(tmp_path):
    """An older database in rollback mode, read under a transaction by another connection while a
    service starts: the switch waits for the reader instead of leaving the file in rollback mode."""
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (i INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.commit()
    assert _journal_mode(path) == "delete"

    reading = threading.Event()

    def hold_a_read() -> None:
        with closing(sqlite3.connect(path, isolation_level=None)) as reader:
            reader.execute("BEGIN")
            reader.execute("SELECT * FROM t").fetchall()  # a shared lock, held to the COMMIT
            reading.set()
            time.sleep(1.0)
            reader.execute("COMMIT")

    holder = threading.Thread(target=hold_a_read)
    holder.start()
    assert reading.wait(10)
    upgrade_sync(f"sqlite+aiosqlite:///{path}")
    holder.join()
    assert _journal_mode(path) == "wal"
