"""Engine and session factory, and the programmatic `alembic upgrade head`."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _ensure_sqlite_dir(url: str) -> None:
    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        Path(u.database).parent.mkdir(parents=True, exist_ok=True)


# A pooled connection back in use within this many seconds is not pinged on checkout.
PING_IDLE_S = 10.0


def create_engine(url: str, echo: bool = False) -> AsyncEngine:
    _ensure_sqlite_dir(url)
    engine = create_async_engine(url, echo=echo)
    if engine.dialect.name == "sqlite":
        sqlite_pragmas(engine.sync_engine)  # a SQLite file has no connection to lose: never pinged
    else:
        ping_when_idle(engine.sync_engine, PING_IDLE_S)
    return engine


def ping_when_idle(engine: Engine, idle_s: float, clock: Callable[[], float] = time.monotonic) -> None:
    """A connection that waited in `engine`'s pool longer than `idle_s` is pinged on checkout, and
    replaced if the ping fails (the database restarted, a proxy dropped it).

    SQLAlchemy's `pool_pre_ping` pings on every checkout: a round trip before every read, each a
    wait for the database's process to be scheduled on a busy machine (docs/decisions.md, "A run's
    start reads the database as little as it can"). A connection used within `idle_s` is not
    pinged: after a restart of the database within that time its first statement fails, which
    invalidates the whole pool (every connection opened before it is replaced), as a statement under
    way at the restart fails with or without a ping.
    """

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_conn, record):  # type: ignore[no-untyped-def]
        record.info["returned_at"] = clock()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_conn, record, _proxy):  # type: ignore[no-untyped-def]
        returned_at = record.info.get("returned_at")
        if returned_at is None or clock() - returned_at <= idle_s:
            return  # just connected, or back in use within idle_s
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception as err:
            raise DisconnectionError(f"pooled connection lost: {err!r}") from err
        if not alive:
            raise DisconnectionError("pooled connection lost")


def sqlite_pragmas(engine: Engine) -> None:
    """Every new connection of `engine` (a SQLite one) set up as the services use SQLite."""

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
        cur.execute("PRAGMA busy_timeout=5000")
        # WAL's recommended level: a commit does not wait for fsync (an OS crash may lose the
        # last commits, a process crash loses nothing). It made a run's start ~10x faster.
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker:  # type: ignore[type-arg]
    return async_sessionmaker(engine, expire_on_commit=False)


def autocommitting(sessions: async_sessionmaker[AsyncSession]) -> async_sessionmaker[AsyncSession]:
    """Sessions like `sessions`' whose statements each commit alone, outside any transaction: for
    reads that need no snapshot across statements, and single-statement writes.

    A session of `sessions` opens a transaction on its first statement and ends it on close: on
    PostgreSQL a BEGIN and a ROLLBACK (or COMMIT), two round trips more than the statement itself,
    each a wait for the database's process to be scheduled on a busy machine (docs/decisions.md,
    "A run's start reads the database as little as it can"). On SQLite `sessions` itself: its
    driver starts no transaction for a read, and switching its connections to autocommit and back
    would cost two thread hops.
    """
    bind = sessions.kw.get("bind")
    if not isinstance(bind, AsyncEngine) or bind.dialect.name == "sqlite":
        return sessions
    return async_sessionmaker(bind.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False)


def sync_url(url: str) -> str:
    """The same database through a synchronous driver (for Alembic)."""
    u = make_url(url)
    if u.drivername == "sqlite+aiosqlite":
        u = u.set(drivername="sqlite")
    elif u.drivername in ("postgresql+asyncpg", "postgresql"):
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    return cfg


# SQLite: the services that already started may hold the write lock for seconds on a loaded
# machine while the next one migrates (each in turn): wait for it, as long as a service's start
# may take, instead of failing the start on the driver's 5 s default.
SQLITE_LOCK_WAIT_S = 60.0

# Alembic's command API keeps module-level state (the `op`/`context` proxies): two
# services upgrading at once in one process (the embedded stack) would corrupt it.
_upgrade_lock = threading.Lock()


@contextlib.contextmanager
def _sqlite_migration_lock(url: str) -> Iterator[None]:
    """Several service processes migrate on start: a file lock per SQLite database serialises them.

    (PostgreSQL takes an advisory lock in migrations/env.py instead.)
    """
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        yield
        return
    # 0600 like the database beside it (a fresh file; an old one keeps its mode: it holds nothing).
    fd = os.open(f"{u.database}.migrate.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    with open(fd, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _sqlite_in_wal(url: str) -> None:
    """A SQLite file switched to WAL (it stays so) before anything migrates it.

    Each service's connections ask for WAL too (`sqlite_pragmas`), but the switch needs the file to
    itself: asked while other processes read and write it, it can fail again and again, and the file
    stays in rollback mode, where a writer waiting to commit shuts out every reader. Five processes
    on one file then held each other over a minute (a service's start failed). Here the switch
    happens under the migration lock, by the first process, when no other can have the file busy.
    """
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return
    with contextlib.closing(sqlite3.connect(u.database, timeout=SQLITE_LOCK_WAIT_S)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")


def upgrade_sync(url: str, revision: str = "heads") -> None:
    _ensure_sqlite_dir(url)
    with _upgrade_lock, _sqlite_migration_lock(url):
        _sqlite_in_wal(url)
        command.upgrade(alembic_config(url), revision)


async def upgrade(url: str, revision: str = "heads") -> None:
    await asyncio.to_thread(upgrade_sync, url, revision)


def head_revisions() -> list[str]:
    """The revisions `upgrade` brings a database to."""
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return sorted(ScriptDirectory.from_config(cfg).get_heads())


def current_revisions(url: str) -> list[str]:
    """The revisions the database is at (empty: never migrated). Blocking: call it in a thread."""
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine as create_sync_engine

    engine = create_sync_engine(sync_url(url))
    try:
        with engine.connect() as conn:
            return sorted(MigrationContext.configure(conn).get_current_heads())
    finally:
        engine.dispose()
