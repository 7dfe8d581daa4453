"""`agentstream db purge` on SQLite and PostgreSQL: every service's purges once, a dry run that
deletes nothing, JSON counts, and ingress's memory and persistence's runs purged together so a
purged run never reads as "still queued" in `/status`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from typer.testing import CliRunner, Result

from agentstream.contracts import InboundMessage, User
from agentstream.db import Message, Run, create_engine, session_factory, upgrade
from agentstream.db.models_ingress import InboundDedupe, IngressConversation
from agentstream_ingress.store import IngressStore
from agentstream_stack.cli import app

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=40)
Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[Sessions]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def cli(db_url: str, *args: str, **retention: str) -> Result:
    env = {"AGENTSTREAM__DATABASE__URL": db_url, "COLUMNS": "200"}
    env.update({f"AGENTSTREAM__RETENTION__{k.upper()}": v for k, v in retention.items()})
    return await asyncio.to_thread(CliRunner().invoke, app, ["db", "purge", *args], env=env)


def message(chat: str) -> InboundMessage:
    return InboundMessage(id=f"m-{chat}", platform="telegram", chat_id=chat, user=User(id="u"), text="hi")


async def add_finished_run(sessions: Sessions, run_id: str, key: str, at: datetime) -> None:
    async with sessions.begin() as s:
        s.add(
            Run(
                run_id=run_id,
                root_run_id=run_id,
                conversation_key=key,
                status="completed",
                text="a",
                started_at=at,
                finished_at=at,
            )
        )
        s.add(
            Message(
                conversation_key=key,
                root_run_id=run_id,
                run_id=run_id,
                seq=0,
                part=0,
                role="user",
                content="hi",
                created_at=at,
            )
        )


async def counts(sessions: Sessions) -> dict[str, int]:
    async with sessions() as s:
        return {
            t.__tablename__: int(await s.scalar(select(func.count()).select_from(t)) or 0)
            for t in (InboundDedupe, Run, Message)
        }


async def seed(sessions: Sessions) -> tuple[InboundMessage, InboundMessage]:
    store = IngressStore(sessions)
    seen = [("kafka", "telegram", "old"), ("kafka", "telegram", "new")]
    await store.first_sightings(seen)
    await store.record_sightings(seen)  # their output was acked
    idle, active = message("idle"), message("active")
    # idle: one run, long finished, nothing since. active: the same, then a run still going today.
    await store.remember_starts([(idle, "run-idle"), (active, "run-active-old")])
    async with sessions.begin() as s:
        await s.execute(update(InboundDedupe).where(InboundDedupe.message_id == "old").values(received_at=OLD))
        await s.execute(update(IngressConversation).values(updated_at=OLD))
    await store.remember_starts([(active, "run-active-now")])
    await add_finished_run(sessions, "run-idle", idle.conversation_key, OLD)
    await add_finished_run(sessions, "run-active-old", active.conversation_key, OLD)
    return idle, active


async def test_dry_run_counts_and_deletes_nothing_then_the_purge_deletes(db_url: str, sessions: Sessions) -> None:
    idle, active = await seed(sessions)
    before = await counts(sessions)

    dry = await cli(db_url, "--dry-run", "--json", history_days="30")
    assert dry.exit_code == 0, dry.output
    report: dict[str, Any] = json.loads(dry.output)
    assert report["dry_run"] is True
    # Counted as the tables stand: the idle conversation's run is freed only once ingress forgets it.
    assert report["purged"] == {
        "inbound_dedupe": 1,
        "pairing_codes": 0,
        "ingress_conversations": 1,
        "delivery_ledger": 0,
        "resume_steps": 0,
        "run_events": 0,
        "run_checkpoints": 0,
        "messages": 2,
        "runs": 0,
    }
    assert await counts(sessions) == before

    done = await cli(db_url, "--json", history_days="30")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["purged"] == {**report["purged"], "runs": 1}
    async with sessions() as s:
        assert set(await s.scalars(select(Run.run_id))) == {"run-active-old"}  # ingress still lists it
    store = IngressStore(sessions)
    assert (await store.facts(idle.conversation_key)).unfinished == ()
    assert (await store.facts(active.conversation_key)).unfinished == ("run-active-now",)


async def test_text_output_and_nothing_to_purge(db_url: str, sessions: Sessions) -> None:
    await seed(sessions)
    text = await cli(db_url)
    assert text.exit_code == 0, text.output
    assert "inbound_dedupe" in text.output and " 1 purged" in text.output and "messages" not in text.output

    nothing = await cli(db_url, inbound_dedupe_days="0", pairing_codes_days="0", delivery_ledger_days="0")
    assert nothing.exit_code == 0 and "nothing to purge" in nothing.output


async def test_bad_retention_is_refused_with_the_key_named(db_url: str) -> None:
    result = await cli(db_url, inbound_dedupe_days="0.1")
    assert result.exit_code == 2
    assert "retention.inbound_dedupe_days" in result.output


async def test_upgrade_says_where_the_database_is_in_text_and_json(db_url: str) -> None:
    from agentstream.db.session import head_revisions

    env = {"AGENTSTREAM__DATABASE__URL": db_url, "COLUMNS": "200"}
    as_json = await asyncio.to_thread(CliRunner().invoke, app, ["db", "upgrade", "--json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    doc = json.loads(as_json.output)
    assert doc["revisions"] == head_revisions() and doc["database"].split("@")[-1] == db_url.split("@")[-1]
    again = await asyncio.to_thread(CliRunner().invoke, app, ["db", "upgrade"], env=env)
    assert again.exit_code == 0 and "database at head" in again.output
