"""The `agentstream` exit codes, and the one line (with a hint) an unreachable broker or database gets.

A command that meets Kafka or the database down would otherwise end in a long traceback whose
last line is all a reader needs. The root command group hands every exception that escapes a
command to `explain`: a known outage becomes one line and its exit code; anything else is a bug
and keeps its traceback. `AGENTSTREAM_TRACEBACK=1` shows the traceback of known outages too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

TRACEBACK_ENV_VAR = "AGENTSTREAM_TRACEBACK"


class ExitCode(IntEnum):
    """Every exit status of `agentstream` (docs/cli.md lists them)."""

    OK = 0
    FAILED = 1  # the command ran and its answer is "no": a run did not complete, a doctor check failed, …
    USAGE = 2  # bad arguments, or an invalid configuration (the message names the key)
    BROKER_DIED = 3  # `agentstream up`: the embedded broker exited; the stack was stopped
    KAFKA_UNREACHABLE = 4
    DATABASE_UNREACHABLE = 5
    IN_USE = 6  # `agentstream up`: another `up` holds the state folder, or a service port is taken
    INTERRUPTED = 130  # Ctrl-C


@dataclass(frozen=True)
class Outage:
    """What a reader is told instead of a traceback."""

    message: str
    hint: str
    code: ExitCode


def command_line(args: str) -> str:
    """How to run `agentstream <args>` from where this one was started: through `uv run` when this one
    was (`agentstream` alone is then not on the caller's PATH)."""
    return f"{'uv run ' if os.environ.get('UV_RUN_RECURSION_DEPTH') else ''}agentstream {args}"


def kafka_hint() -> str:
    return (
        "is the broker running? check kafka.bootstrap_servers (env AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS); "
        f"`{command_line('doctor')}` checks every dependency"
    )


def database_hint() -> str:
    return (
        "is the database server running and the path writable? check database.url (env AGENTSTREAM__DATABASE__URL); "
        f"`{command_line('doctor')}` checks every dependency"
    )


# Where a failure comes from, by the packages its traceback passes through.
_KAFKA_MODULES = ("aiokafka", "faststream", "agentstream.kafka")
_DATABASE_MODULES = ("sqlalchemy", "alembic", "asyncpg", "psycopg", "aiosqlite", "sqlite3", "agentstream.db")


def show_tracebacks() -> bool:
    return os.environ.get(TRACEBACK_ENV_VAR, "").lower() in ("1", "true", "yes")


def explain(error: BaseException) -> Outage | None:
    """The outage `error` stands for, or None when it is not one (a bug: keep its traceback)."""
    chain = list(_chain(error))
    # A database error raised while connecting (through SQLAlchemy's pool), not by a statement ("no such table").
    connecting = _from([m for exc in chain for m in _modules(exc)], ("sqlalchemy.pool",))
    for exc in chain:
        modules = _modules(exc)
        if _is_kafka_error(exc) or (isinstance(exc, OSError) and _from(modules, _KAFKA_MODULES)):
            return Outage(f"kafka unreachable: {_summary(exc)}", kafka_hint(), ExitCode.KAFKA_UNREACHABLE)
        if (_is_database_error(exc) and connecting) or (isinstance(exc, OSError) and _from(modules, _DATABASE_MODULES)):
            return Outage(f"database unreachable: {_summary(exc)}", database_hint(), ExitCode.DATABASE_UNREACHABLE)
    return None


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error, its causes and contexts, and the members of exception groups (each once)."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        exc = todo.pop(0)
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        if isinstance(exc, BaseExceptionGroup):
            todo.extend(exc.exceptions)
        todo.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)


def _modules(exc: BaseException) -> list[str]:
    names = []
    tb = exc.__traceback__
    while tb is not None:
        names.append(str(tb.tb_frame.f_globals.get("__name__", "")))
        tb = tb.tb_next
    return names


def _from(modules: list[str], packages: tuple[str, ...]) -> bool:
    return any(m == p or m.startswith(p + ".") for m in modules for p in packages)


def _is_kafka_error(exc: BaseException) -> bool:
    module = type(exc).__module__
    # A timeout or connection error of the client; not e.g. a topic-level error answered by a live broker.
    return module.startswith("aiokafka") and type(exc).__name__ in (
        "KafkaConnectionError",
        "KafkaTimeoutError",
        "NodeNotReadyError",
        "RequestTimedOutError",
    )


def _is_database_error(exc: BaseException) -> bool:
    module = type(exc).__module__
    return module.startswith("sqlalchemy") and type(exc).__name__ in ("OperationalError", "InterfaceError")


def _summary(exc: BaseException) -> str:
    """The error's first line, with credentials masked (a driver may quote the URL)."""
    from agentstream.secrets_mask import mask_url

    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return mask_url(text)
