"""The database writes of a finished run and the read API on SQLite and PostgreSQL (no broker)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import (
    ChatMessage,
    MessageCompleted,
    ReplyTarget,
    RunFinished,
    RunStarted,
    ToolCall,
    ToolResult,
)
from agentstream.db import Conversation, Message, Run, create_engine, session_factory, upgrade
from agentstream_persistence.api import add_routes
from agentstream_persistence.buffers import BufferSet
from agentstream_persistence.rows import FlushRows, rows_for
from agentstream_persistence.run_writes import write_run, write_runs
from agentstream_testing.fixtures import ADMIN_HEADERS, authed_app

KEY = "memory:c1"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def run_rows(
    root: str, question: str, answer: str, minute: int, session_id: str | None = "s1", key: str = KEY
) -> FlushRows:
    def ids(seq: int) -> dict[str, object]:
        return {
            "run_id": root,
            "root_run_id": root,
            "conversation_key": key,
            "seq": seq,
            "ts": T0 + timedelta(minutes=minute, seconds=seq),
        }

    buffers = BufferSet()
    for ev in (
        RunStarted(
            **ids(1),
            assistant_id="default",
            connector_id="demo",
            session_id=session_id,
            reply_target=ReplyTarget(platform="memory", chat_id="c1"),
            input=[ChatMessage(role="user", content=question)],
        ),
        ToolCall(**ids(2), call_id="c1", tool="calculator", arguments='{"expression": "6*7"}'),
        ToolResult(**ids(3), call_id="c1", tool="calculator", ok=True, content="42"),
        MessageCompleted(**ids(4), message_id="m", text=answer),
        RunFinished(**ids(5), status="completed", text=answer),
    ):
        buffers.add(ev)
    buf = buffers.get(root)
    assert buf is not None
    return rows_for(buf)


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    await upgrade(db_url)
    await upgrade(db_url)  # a second upgrade is a no-op
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def count(sessions: async_sessionmaker[AsyncSession], table: type) -> int:
    async with sessions() as s:
        return int(await s.scalar(select(func.count()).select_from(table)) or 0)


async def test_flushing_the_same_run_twice_leaves_one_copy(sessions: async_sessionmaker[AsyncSession]):
    rows = run_rows("r1", "calculate 6*7", "It is 42.", minute=0)
    await write_run(sessions, rows)
    await write_run(sessions, rows)
    assert (await count(sessions, Run), await count(sessions, Message), await count(sessions, Conversation)) == (
        1,
        3,
        1,
    )
    async with sessions() as s:
        run = await s.get(Run, "r1")
        assert run is not None and run.status == "completed" and run.text == "It is 42."
        contents = (await s.scalars(select(Message.content).order_by(Message.seq))).all()
    assert contents == ["calculate 6*7", 'calculator({"expression": "6*7"}) → 42', "It is 42."]


async def test_conversation_follows_the_newest_run(sessions: async_sessionmaker[AsyncSession]):
    await write_run(sessions, run_rows("r1", "q1", "a1", minute=0, session_id="s1"))
    await write_run(sessions, run_rows("r2", "q2", "a2", minute=5, session_id="s2"))
    await write_run(sessions, run_rows("r1", "q1", "a1", minute=0, session_id="s1"))  # re-delivered old run
    async with sessions() as s:
        conv = await s.get(Conversation, KEY)
    assert conv is not None and conv.session_id == "s2"
    assert conv.updated_at.replace(tzinfo=UTC) == T0 + timedelta(minutes=5, seconds=5)


async def test_read_api(sessions: async_sessionmaker[AsyncSession]):
    await write_run(sessions, run_rows("r2", "second question", "second answer", minute=5))
    await write_run(sessions, run_rows("r1", "first question", "first answer", minute=0))
    app = authed_app()
    add_routes(app, sessions)
    async with httpx.AsyncClient(
        headers=ADMIN_HEADERS, transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        run = (await http.get("/v1/runs/r1")).json()
        assert (run["run_id"], run["status"], run["text"], run["connector_id"], run["llm_calls"]) == (
            "r1",
            "completed",
            "first answer",
            "demo",
            0,
        )
        assert run["finished_at"] in ("2026-01-01T12:00:05Z", "2026-01-01T12:00:05+00:00")  # UTC on both engines
        assert (await http.get("/v1/runs/nope")).status_code == 404
        runs = (await http.get(f"/v1/conversations/{KEY}/runs")).json()
        assert [r["run_id"] for r in runs["items"]] == ["r1", "r2"] and runs["next_cursor"] is None
        messages = (await http.get(f"/v1/conversations/{KEY}/messages")).json()["items"]
        assert [(m["role"], m["content"]) for m in messages] == [
            ("user", "first question"),
            ("tool", 'calculator({"expression": "6*7"}) → 42'),
            ("assistant", "first answer"),
            ("user", "second question"),
            ("tool", 'calculator({"expression": "6*7"}) → 42'),
            ("assistant", "second answer"),
        ]
        assert (await http.get("/v1/conversations/unknown:x/messages")).json() == {"items": [], "next_cursor": None}


async def test_a_batch_stores_what_its_runs_store_one_at_a_time(sessions: async_sessionmaker[AsyncSession]):
    # Two runs of one conversation, the newer first (an older run re-read after it must not move the
    # conversation back), and a run of another conversation.
    batch = [
        run_rows("r2", "q2", "a2", minute=5, session_id="s2"),
        run_rows("r1", "q1", "a1", minute=0, session_id="s1"),
        run_rows("r3", "q3", "a3", minute=1, session_id=None, key="memory:c2"),
    ]
    await write_runs(sessions, batch)
    await write_runs(sessions, batch)  # re-delivered: nothing twice
    assert (await count(sessions, Run), await count(sessions, Message), await count(sessions, Conversation)) == (
        3,
        9,
        2,
    )
    async with sessions() as s:
        conv = await s.get(Conversation, KEY)
        other = await s.get(Conversation, "memory:c2")
        texts = {r.run_id: r.text for r in (await s.scalars(select(Run))).all()}
    assert conv is not None and conv.session_id == "s2"
    assert conv.updated_at.replace(tzinfo=UTC) == T0 + timedelta(minutes=5, seconds=5)
    assert other is not None and other.session_id is None
    assert texts == {"r1": "a1", "r2": "a2", "r3": "a3"}


async def test_a_batch_is_a_few_statements_whatever_its_size(sessions: async_sessionmaker[AsyncSession]):
    """Each statement on SQLite is a hop through the event loop with the write lock held: a batch's
    statements must not grow with its runs."""
    engine = sessions.kw["bind"]
    statements: list[str] = []

    def counted(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")):
            statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", counted)
    try:
        await write_runs(sessions, [run_rows(f"a{i}", "q", "a", minute=i) for i in range(2)])
        few = len(statements)
        statements.clear()
        await write_runs(sessions, [run_rows(f"b{i}", "q", "a", minute=i) for i in range(40)])
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", counted)
    assert len(statements) == few, statements
    assert await count(sessions, Run) == 42
