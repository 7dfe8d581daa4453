"""A ResumeRun read again after its resume had begun on a runner that died (docs/decisions.md
§ Orphaned runs): the launcher waits for the checkpoint of that resume's ending and numbers after
it, and a second ResumeRun for the same checkpoint resumes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from agentstream.config import ConnectorSettings, load_settings
from agentstream.contracts import CheckpointStart, ReplyTarget, ResumeRun, RunStarted, Usage
from agentstream.db.models import Base
from agentstream.db.models_persistence import RunCheckpoint
from agentstream_runner.assistants import Assistants
from agentstream_runner.connectors.base import LLMRequest, TextDelta, UsageChunk
from agentstream_runner.connectors.resolve import Connectors
from agentstream_runner.context import RunContext, RunControl
from agentstream_runner.launcher import RunLauncher
from tests.unit.runner.test_launcher import Ports

KEY = "web:c1"


class Answers:
    id = "answers"
    capabilities = frozenset({"tools", "streaming"})

    def __init__(self, config: ConnectorSettings) -> None:
        pass

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Any, None]:
        yield TextDelta("done")
        yield UsageChunk(Usage(prompt_tokens=1, completion_tokens=1, llm_calls=1))


async def test_a_resume_read_again_continues_past_the_resume_begun_since_and_once(tmp_path):
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    now = datetime.now(UTC)
    start = CheckpointStart(user_id="u1", reply_target=ReplyTarget(platform="web", chat_id="c1"), text="q")
    async with sessions() as session, session.begin():
        session.add(
            RunCheckpoint(
                root_run_id="r1",
                conversation_key=KEY,
                status="failed",
                last_seq=4,  # the first ending: the resume the dead runner began numbered from 5
                usage={},
                start=start.model_dump(mode="json"),
                created_at=now,
                updated_at=now,
            )
        )
    settings = load_settings(
        connectors=[{"id": "answers", "type": "scripted"}], default_connector="answers", runner={"coalesce_ms": 0}
    )
    ports = Ports()
    launcher = RunLauncher(
        RunContext(ports, Connectors(settings, {"scripted": Answers}), Assistants(settings), settings.runner),
        sessions,
        structlog.get_logger(),
    )
    with launcher.taken_runs.scanning():
        launcher.taken_runs.resume_began("r1", 9)  # the scan ended that resume at 9

    resuming = asyncio.create_task(launcher.run(ResumeRun(run_id="r1", conversation_key=KEY), RunControl()))
    await asyncio.sleep(0.5)
    assert ports.events == [] and not resuming.done()  # the checkpoint of 4 is not resumed from
    async with sessions() as session, session.begin():  # persistence writes the checkpoint of the ending at 9
        await session.execute(update(RunCheckpoint).where(RunCheckpoint.root_run_id == "r1").values(last_seq=9))
    await asyncio.wait_for(resuming, 5)
    [started] = [e for e in ports.events if isinstance(e, RunStarted)]
    assert started.seq == 10
    [ending] = ports.endings()
    assert (ending.status, ending.text) == ("completed", "done")

    # The ResumeRun persistence issued for the ending at 9, read while the checkpoint is still there.
    published = len(ports.events)
    await launcher.run(ResumeRun(run_id="r1", conversation_key=KEY), RunControl())
    assert len(ports.events) == published
    await engine.dispose()
