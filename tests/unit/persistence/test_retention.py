"""persistence's retention on SQLite and PostgreSQL: with `history_days`, old messages and runs go,
with their resume state; runs ingress still remembers stay; 0 (the default) keeps everything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.config import load_settings
from agentstream.db import Message, Run, create_engine, session_factory, upgrade
from agentstream.db.models_ingress import IngressConversation
from agentstream.db.models_persistence import ResumeStep, RunCheckpoint, RunEventRow
from agentstream.retention import run_purges
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_persistence.retention import persistence_purges

NOW = datetime.now(UTC)
DAY = timedelta(days=1)
Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[Sessions]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def add_run(
    sessions: Sessions,
    run_id: str,
    age: timedelta,
    messages: int = 2,
    checkpoint: bool = False,
    key: str = "telegram:c1",
) -> None:
    at = NOW - age
    async with sessions.begin() as s:
        s.add(
            Run(
                run_id=run_id,
                root_run_id=run_id,
                conversation_key=key,
                status="failed" if checkpoint else "completed",
                text="answer",
                started_at=at,
                finished_at=at,
            )
        )
        s.add_all(
            Message(
                conversation_key=key,
                root_run_id=run_id,
                run_id=run_id,
                seq=i,
                part=0,
                role="user",
                content="hi",
                created_at=at,
            )
            for i in range(messages)
        )
        s.add_all(  # its archived visible stream
            RunEventRow(root_run_id=run_id, seq=i, type="message.completed", event={}, created_at=at) for i in range(2)
        )
        if checkpoint:
            s.add(
                RunCheckpoint(
                    root_run_id=run_id,
                    conversation_key=key,
                    status="failed",
                    last_seq=3,
                    usage={},
                    start={},
                    created_at=at,
                    updated_at=at,
                )
            )
            s.add_all(
                ResumeStep(
                    root_run_id=run_id,
                    run_id=run_id,
                    seq=i,
                    step_id=f"s{i}",
                    step_type="llm",
                    input={},
                    output={},
                    memory=[],
                    created_at=at,
                )
                for i in range(3)
            )


async def stored(sessions: Sessions) -> dict[str, set[str]]:
    async with sessions() as s:
        return {
            "runs": set(await s.scalars(select(Run.run_id))),
            "messages": set(await s.scalars(select(Message.root_run_id))),
            "checkpoints": set(await s.scalars(select(RunCheckpoint.root_run_id))),
            "steps": set(await s.scalars(select(ResumeStep.root_run_id))),
            "events": set(await s.scalars(select(RunEventRow.root_run_id))),
        }


async def test_old_history_goes_with_its_resume_state_new_and_remembered_runs_stay(sessions: Sessions) -> None:
    await add_run(sessions, "old", 40 * DAY, messages=7, checkpoint=True)
    await add_run(sessions, "remembered", 40 * DAY, key="telegram:c2")
    await add_run(sessions, "new", 5 * DAY, checkpoint=True)
    async with sessions.begin() as s:  # ingress still lists this run for /status of its conversation
        s.add(IngressConversation(key="telegram:c2", pending_runs={"run_ids": ["remembered"]}, updated_at=NOW))

    settings = load_settings(retention={"history_days": 30, "batch_size": 3})
    plan = persistence_purges(settings, NOW)
    due = await run_purges(sessions, plan, 3, dry_run=True)
    assert due == {"resume_steps": 3, "run_events": 2, "run_checkpoints": 1, "messages": 9, "runs": 1}
    assert (await stored(sessions))["runs"] == {"old", "remembered", "new"}  # a dry run deletes nothing

    assert await run_purges(sessions, plan, 3) == due
    assert await stored(sessions) == {
        "runs": {"remembered", "new"},
        "messages": {"new"},
        "checkpoints": {"new"},
        "steps": {"new"},
        "events": {"remembered", "new"},
    }
    assert await run_purges(sessions, plan, 3) == {
        "resume_steps": 0,
        "run_events": 0,
        "run_checkpoints": 0,
        "messages": 0,
        "runs": 0,
    }


async def test_resume_state_left_by_an_interrupted_pass_is_found_by_the_next(sessions: Sessions) -> None:
    await add_run(sessions, "old", 40 * DAY, checkpoint=True)
    async with sessions.begin() as s:  # as if a pass deleted the run but stopped before its steps
        await s.delete(await s.get(Run, "old"))
    plan = persistence_purges(load_settings(retention={"history_days": 30}), NOW)
    purged = await run_purges(sessions, plan, 100)
    assert (purged["resume_steps"], purged["run_events"]) == (3, 2)
    assert await stored(sessions) == {
        "runs": set(),
        "messages": set(),
        "checkpoints": set(),
        "steps": set(),
        "events": set(),
    }


async def test_history_is_kept_forever_by_default(sessions: Sessions) -> None:
    await add_run(sessions, "ancient", 4000 * DAY, checkpoint=True)
    assert persistence_purges(load_settings(), NOW) == []
    assert (await stored(sessions))["runs"] == {"ancient"}


def test_persistence_runs_its_own_purges() -> None:
    svc = bootstrap_persistence(load_settings())
    assert svc.retention.plan is persistence_purges
