"""delivery's retention on SQLite and PostgreSQL: old ledger rows of settled sends go; rows still
in flight (`pending`, `sending`) stay whatever their age, and so do recent ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.config import load_settings
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models_delivery import DeliveryLedger
from agentstream.retention import run_purges
from agentstream_delivery import bootstrap
from agentstream_delivery.ledger import SETTLED_STATES, LedgerEntry, LedgerScope, SqlLedger
from agentstream_delivery.retention import delivery_purges

NOW = datetime.now(UTC)
ALL_STATES = ("pending", "sending", "sent", "unknown", "failed")
Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[Sessions]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def write_rows(sessions: Sessions, root: str, age: timedelta) -> None:
    """One row per state (segment i), through the ledger itself, then aged."""
    ledger = SqlLedger(sessions)
    scope = LedgerScope("telegram", "chat", root, "telegram:chat")
    for segment, state in enumerate(ALL_STATES):
        await ledger.record(scope, LedgerEntry(segment, state))  # type: ignore[arg-type]
    async with sessions.begin() as s:
        await s.execute(update(DeliveryLedger).where(DeliveryLedger.root_run_id == root).values(updated_at=NOW - age))


async def rows(sessions: Sessions) -> set[tuple[str, str]]:
    async with sessions() as s:
        return {(r, st) for r, st in (await s.execute(select(DeliveryLedger.root_run_id, DeliveryLedger.state)))}


async def test_old_settled_rows_go_rows_in_flight_and_recent_rows_stay(sessions: Sessions) -> None:
    assert set(ALL_STATES) - SETTLED_STATES == {"pending", "sending"}
    await write_rows(sessions, "old", timedelta(days=8))
    await write_rows(sessions, "new", timedelta(days=6))
    settings = load_settings(retention={"batch_size": 2})  # more rows than one batch

    due = await run_purges(sessions, delivery_purges(settings, NOW), 2, dry_run=True)
    assert due == {"delivery_ledger": 3}
    assert len(await rows(sessions)) == 10  # the dry run deleted nothing

    assert await run_purges(sessions, delivery_purges(settings, NOW), 2) == {"delivery_ledger": 3}
    assert await rows(sessions) == {("old", "pending"), ("old", "sending")} | {("new", s) for s in ALL_STATES}


async def test_a_ledger_retention_of_zero_keeps_every_row(sessions: Sessions) -> None:
    await write_rows(sessions, "old", timedelta(days=800))
    assert delivery_purges(load_settings(retention={"delivery_ledger_days": 0}), NOW) == []
    assert len(await rows(sessions)) == 5


def test_delivery_runs_its_own_purges() -> None:
    svc = bootstrap(load_settings())
    assert svc.retention.plan is delivery_purges
