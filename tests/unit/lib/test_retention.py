"""The retention library on SQLite and PostgreSQL: bounded batches, dry runs, the periodic task
(metric, log, a failing pass retried), and the settings' refusals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agentstream.config import ConfigError, Settings, load_settings
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models_ingress import InboundDedupe
from agentstream.retention import Purge, RetentionTask, purge_rows, table_of

NOW = datetime.now(UTC)


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[tuple[AsyncEngine, async_sessionmaker[AsyncSession]]]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield engine, session_factory(engine)
    await engine.dispose()


async def add_dedupe(sessions: async_sessionmaker[AsyncSession], n: int, age: timedelta, tag: str) -> None:
    async with sessions.begin() as s:
        s.add_all(
            InboundDedupe(source="kafka", platform="telegram", message_id=f"{tag}{i}", received_at=NOW - age)
            for i in range(n)
        )


async def dedupe_ids(sessions: async_sessionmaker[AsyncSession]) -> set[str]:
    async with sessions() as s:
        return set(await s.scalars(select(InboundDedupe.message_id)))


def older_than_a_day() -> Purge:
    dedupe = table_of(InboundDedupe)
    return Purge(dedupe, dedupe.c.received_at < NOW - timedelta(days=1))


async def test_a_purge_deletes_in_batches_of_at_most_batch_size(db: Any) -> None:
    engine, sessions = db
    await add_dedupe(sessions, 12, timedelta(days=3), "old")
    await add_dedupe(sessions, 3, timedelta(hours=1), "new")
    deleted_per_statement: list[int] = []

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _count(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            deleted_per_statement.append(cursor.rowcount)

    assert await purge_rows(sessions, older_than_a_day(), batch_size=5) == 12
    assert deleted_per_statement == [5, 5, 2]
    assert await dedupe_ids(sessions) == {"new0", "new1", "new2"}


async def test_a_dry_run_counts_and_deletes_nothing(db: Any) -> None:
    _, sessions = db
    await add_dedupe(sessions, 7, timedelta(days=3), "old")
    await add_dedupe(sessions, 2, timedelta(hours=1), "new")
    assert await purge_rows(sessions, older_than_a_day(), batch_size=5, dry_run=True) == 7
    assert len(await dedupe_ids(sessions)) == 9


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def info(self, msg: str, **kw: Any) -> None:
        self.lines.append(("info", msg, kw))

    def warning(self, msg: str, **kw: Any) -> None:
        self.lines.append(("warning", msg, kw))


def settings(**retention: Any) -> Settings:
    return load_settings(retention={"interval_s": 0.05, **retention})


async def test_the_task_purges_every_interval_counts_and_logs(db: Any) -> None:
    _, sessions = db
    registry, log = CollectorRegistry(), Log()
    task = RetentionTask(lambda _s, _now: [older_than_a_day()], settings(batch_size=2), registry, log)
    await add_dedupe(sessions, 3, timedelta(days=3), "a")
    task.start(sessions)
    try:
        for _ in range(200):
            if await dedupe_ids(sessions) == set():
                break
            await asyncio.sleep(0.02)
        await add_dedupe(sessions, 2, timedelta(days=3), "b")  # the next interval's pass takes these
        for _ in range(200):
            if (
                await dedupe_ids(sessions) == set()
                and registry.get_sample_value("agentstream_purged_rows_total", {"table": "inbound_dedupe"}) == 5
            ):
                break
            await asyncio.sleep(0.02)
    finally:
        await task.stop()
    assert registry.get_sample_value("agentstream_purged_rows_total", {"table": "inbound_dedupe"}) == 5
    purged = [kw["purged"]["inbound_dedupe"] for level, msg, kw in log.lines if msg == "retention purge"]
    assert sum(purged) == 5 and 3 in purged


async def test_a_failing_pass_is_logged_and_the_next_interval_tries_again(db: Any) -> None:
    _, sessions = db
    registry, log = CollectorRegistry(), Log()
    calls = 0

    def plan(_settings: Settings, _now: datetime) -> list[Purge]:
        nonlocal calls
        calls += 1
        if calls == 1:  # the first pass meets a broken statement (as a database outage would)
            dedupe = table_of(InboundDedupe)
            return [Purge(dedupe, func.no_such_function(dedupe.c.received_at) < 1)]
        return [older_than_a_day()]

    await add_dedupe(sessions, 2, timedelta(days=3), "old")
    task = RetentionTask(plan, settings(), registry, log)
    task.start(sessions)
    try:
        for _ in range(200):
            if await dedupe_ids(sessions) == set():
                break
            await asyncio.sleep(0.02)
    finally:
        await task.stop()
    assert await dedupe_ids(sessions) == set()
    assert [m for level, m, _ in log.lines if level == "warning"][:1] == ["retention purge failed"]
    assert registry.get_sample_value("agentstream_purge_failures_total") == 1
    assert calls >= 2


async def test_a_disabled_task_never_runs(db: Any) -> None:
    _, sessions = db
    await add_dedupe(sessions, 2, timedelta(days=3), "old")
    task = RetentionTask(lambda _s, _now: [older_than_a_day()], settings(enabled=False), CollectorRegistry(), Log())
    task.start(sessions)
    await asyncio.sleep(0.2)
    await task.stop()
    assert len(await dedupe_ids(sessions)) == 2


@pytest.mark.parametrize("key", ["inbound_dedupe_days", "delivery_ledger_days"])
def test_dedupe_and_ledger_retention_shorter_than_a_day_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"retention\.{key}: .*at least 1 day"):
        load_settings(retention={key: 0.5})
    assert getattr(load_settings(retention={key: 0}).retention, key) == 0


def test_defaults_keep_history_and_forget_dedupe_after_a_week() -> None:
    r = Settings().retention
    assert (r.enabled, r.interval_s, r.batch_size) == (True, 3600.0, 5000)
    assert (r.inbound_dedupe_days, r.delivery_ledger_days, r.history_days) == (7.0, 7.0, 0.0)
    assert (r.revoked_keys_days, r.pairing_codes_days) == (0.0, 1.0)
