"""Read API: runs, a conversation's messages, a run's resume checkpoint, straight from the database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException
from pydantic import AfterValidator, BaseModel, ConfigDict
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.db import Message, Run
from agentstream.db.models_persistence import ResumeStep, RunCheckpoint

SessionsGetter = Callable[[], async_sessionmaker[AsyncSession] | None]


def _as_utc(value: datetime) -> datetime:
    # SQLite hands timestamps back without their zone; every stored timestamp is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]


class RunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    run_id: str
    root_run_id: str
    parent_run_id: str | None
    conversation_key: str
    session_id: str | None
    assistant_id: str | None
    connector_id: str | None
    user_id: str | None
    status: str
    error: str | None
    reason: str | None
    text: str
    prompt_tokens: int
    completion_tokens: int
    llm_calls: int
    duration_ms: float
    started_at: UtcDatetime | None
    finished_at: UtcDatetime | None


class MessageOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    root_run_id: str
    run_id: str
    seq: int
    part: int
    role: str
    content: str
    name: str | None
    tool_call_id: str | None
    session_id: str | None
    created_at: UtcDatetime


class ResumeStepOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    run_id: str
    seq: int
    step_id: str
    step_type: str
    input: dict[str, Any]
    output: dict[str, Any]
    memory: list[dict[str, Any]]
    created_at: UtcDatetime


class CheckpointOut(BaseModel):
    """How a not-completed run ended, its usage so far, and its completed steps in order."""

    model_config = ConfigDict(from_attributes=True)

    root_run_id: str
    conversation_key: str
    status: str
    reason: str | None
    error: str | None
    last_seq: int
    usage: dict[str, Any]
    start: dict[str, Any]
    resume_attempts: int
    updated_at: UtcDatetime
    steps: list[ResumeStepOut] = []


def add_routes(app: FastAPI, sessions: SessionsGetter) -> None:
    def db() -> async_sessionmaker[AsyncSession]:
        factory = sessions()
        if factory is None:
            raise HTTPException(503, "database not open yet")
        return factory

    @app.get("/v1/runs/{run_id}", tags=["persistence"])
    async def get_run(run_id: str) -> RunOut:
        async with db()() as session:
            run = await session.get(Run, run_id)
        if run is None:
            raise HTTPException(404, f"run {run_id} not found")
        return RunOut.model_validate(run)

    @app.get("/v1/conversations/{key:path}/runs", tags=["persistence"])
    async def conversation_runs(key: str) -> list[RunOut]:
        query = (select(Run).where(Run.conversation_key == key)
                 .order_by(func.coalesce(Run.started_at, Run.finished_at), Run.run_id))
        async with db()() as session:
            return [RunOut.model_validate(r) for r in (await session.scalars(query)).all()]

    @app.get("/v1/conversations/{key:path}/messages", tags=["persistence"])
    async def conversation_messages(key: str) -> list[MessageOut]:
        # Runs of a conversation are sequential: order by run start, then by stream position.
        run_start = func.coalesce(Run.started_at, Run.finished_at)
        query = (select(Message).outerjoin(Run, Run.run_id == Message.root_run_id)
                 .where(Message.conversation_key == key)
                 .order_by(run_start, Message.root_run_id, Message.seq, Message.part))
        async with db()() as session:
            return [MessageOut.model_validate(m) for m in (await session.scalars(query)).all()]

    @app.get("/v1/runs/{run_id}/resume-steps", tags=["persistence"])
    async def resume_steps(run_id: str) -> CheckpointOut:
        """404 when the run has no checkpoint: it completed (or was resumed to completion) or is unknown."""
        async with db()() as session:
            checkpoint = await session.get(RunCheckpoint, run_id)
            if checkpoint is None:
                raise HTTPException(404, f"run {run_id} has no resume checkpoint")
            steps = (await session.scalars(
                select(ResumeStep).where(ResumeStep.root_run_id == run_id).order_by(ResumeStep.seq))).all()
        out = CheckpointOut.model_validate(checkpoint)
        out.steps = [ResumeStepOut.model_validate(s) for s in steps]
        return out
