"""The flush writes a checkpoint for a run that did not complete, deletes it when the run
later completes (resumed under the same id), never brings it back on a re-read, and the
read API serves it (SQLite and PostgreSQL, no broker)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import (
    ChatMessage,
    MessageCompleted,
    ReplyTarget,
    RunFinished,
    RunStarted,
    StepCompleted,
    Usage,
)
from agentstream.db import Message, Run, create_engine, session_factory, upgrade
from agentstream.db.models_persistence import ResumeStep, RunCheckpoint
from agentstream_persistence.api import add_routes
from agentstream_persistence.buffers import BufferSet
from agentstream_persistence.rows import FlushRows, rows_for
from agentstream_persistence.run_writes import claim_resume, write_run
from agentstream_testing.fixtures import ADMIN_HEADERS, authed_app

KEY = "memory:c1"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
USER = ChatMessage(role="user", content="q")


def ids(seq: int) -> dict[str, object]:
    return {"run_id": "r1", "root_run_id": "r1", "conversation_key": KEY, "seq": seq, "ts": T0 + timedelta(seconds=seq)}


def rows(events: list[object]) -> FlushRows:
    buffers = BufferSet()
    for ev in events:
        buffers.add(ev)  # type: ignore[arg-type]
    buf = buffers.get("r1")
    assert buf is not None
    return rows_for(buf)


def first_attempt() -> FlushRows:
    """llm-1 completed (called a tool), then the run was interrupted."""
    assistant = ChatMessage(role="assistant", content="")
    return rows(
        [
            RunStarted(
                **ids(1),
                assistant_id="default",
                connector_id="fake",
                user_id="u1",
                input=[USER],
                reply_target=ReplyTarget(platform="memory", chat_id="c1"),
            ),
            StepCompleted(**ids(2), step_id="llm-1", step_type="llm", output={"text": ""}, memory=[USER, assistant]),
            RunFinished(**ids(3), status="interrupted", reason="user", usage=Usage(prompt_tokens=5, llm_calls=1)),
        ]
    )


def resumed(status: str) -> FlushRows:
    """The same run id continued after seq 3."""
    return rows(
        [
            RunStarted(
                **ids(4),
                assistant_id="default",
                connector_id="fake",
                user_id="u1",
                reply_target=ReplyTarget(platform="memory", chat_id="c1"),
            ),
            MessageCompleted(**ids(5), message_id="m", text="answer"),
            StepCompleted(**ids(6), step_id="llm-2", step_type="llm", output={"text": "answer"}, memory=[USER]),
            RunFinished(
                **ids(7),
                status=status,
                reason=None if status == "completed" else "runner_lost",
                text="answer",
                usage=Usage(prompt_tokens=12, llm_calls=2),
            ),
        ]
    )


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def count(sessions: async_sessionmaker[AsyncSession], table: type) -> int:
    async with sessions() as s:
        return int(await s.scalar(select(func.count()).select_from(table)) or 0)


async def api_get(sessions: async_sessionmaker[AsyncSession], path: str) -> httpx.Response:
    app = authed_app()
    add_routes(app, sessions)
    async with httpx.AsyncClient(
        headers=ADMIN_HEADERS, transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        return await http.get(path)


async def test_interrupted_run_leaves_a_checkpoint_served_by_the_api(sessions):
    await write_run(sessions, first_attempt())
    await write_run(sessions, first_attempt())  # replayed: nothing twice
    assert (await count(sessions, RunCheckpoint), await count(sessions, ResumeStep)) == (1, 1)
    body = (await api_get(sessions, "/v1/runs/r1/resume-steps")).json()
    assert (body["status"], body["reason"], body["last_seq"], body["usage"]["prompt_tokens"]) == (
        "interrupted",
        "user",
        3,
        5,
    )
    assert [(s["step_id"], s["seq"]) for s in body["steps"]] == [("llm-1", 2)]
    assert [m["role"] for m in body["steps"][0]["memory"]] == ["user", "assistant"]
    assert (await api_get(sessions, "/v1/runs/nope/resume-steps")).status_code == 404


async def test_a_failing_resume_adds_steps_and_keeps_the_start(sessions):
    await write_run(sessions, first_attempt())
    await write_run(sessions, resumed("failed"))
    body = (await api_get(sessions, "/v1/runs/r1/resume-steps")).json()
    assert [s["step_id"] for s in body["steps"]] == ["llm-1", "llm-2"]
    assert (body["status"], body["reason"], body["last_seq"]) == ("failed", "runner_lost", 7)
    assert body["start"]["input"][0]["content"] == "q"  # from the first attempt's run.started


async def test_completion_after_resume_deletes_the_checkpoint_and_a_re_read_does_not_restore_it(sessions):
    await write_run(sessions, first_attempt())
    await write_run(sessions, resumed("completed"))
    assert (await count(sessions, RunCheckpoint), await count(sessions, ResumeStep)) == (0, 0)
    await write_run(sessions, first_attempt())  # persistence restarted and re-read the old ending
    assert (await count(sessions, RunCheckpoint), await count(sessions, ResumeStep)) == (0, 0)
    async with sessions() as s:
        run = await s.get(Run, "r1")
        contents = (await s.scalars(select(Message.content).order_by(Message.seq))).all()
    assert run is not None and (run.status, run.text, run.prompt_tokens, run.llm_calls) == (
        "completed",
        "answer",
        12,
        2,
    )
    assert list(contents) == ["q", "answer"]  # the user input once, the answer once


async def test_auto_resume_attempts_are_bounded(sessions):
    await write_run(sessions, first_attempt())
    assert await claim_resume(sessions, "r1", max_attempts=2) == 1
    assert await claim_resume(sessions, "r1", max_attempts=2) == 2
    assert await claim_resume(sessions, "r1", max_attempts=2) is None
    assert await claim_resume(sessions, "unknown", max_attempts=2) is None
    await write_run(sessions, resumed("failed"))  # a later failure does not reset the count
    assert await claim_resume(sessions, "r1", max_attempts=2) is None


async def test_a_late_runner_lost_ending_does_not_undo_a_completion(sessions):
    await write_run(sessions, resumed("completed"))
    late = rows([RunFinished(**{**ids(8), "ts": T0 + timedelta(minutes=5)}, status="failed", reason="runner_lost")])
    await write_run(sessions, late)
    async with sessions() as s:
        run = await s.get(Run, "r1")
    assert run is not None and (run.status, run.reason) == ("completed", None)
    assert await count(sessions, RunCheckpoint) == 0
