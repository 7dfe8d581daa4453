"""Read API: runs, a conversation's messages, a run's resume checkpoint, straight from the database.

Lists come in pages (`limit`, `cursor` → `items`, `next_cursor`); see `pages` and `queries`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Query
from pydantic import AfterValidator, BaseModel, ConfigDict
from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.auth import AUTH_RESPONSES, Principal, Scope, requires
from agentstream.contracts import CheckpointStart, RunStatus
from agentstream.db import Run
from agentstream.db.models_persistence import ResumeStep, RunCheckpoint
from agentstream_persistence import queries
from agentstream_persistence.pages import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, InvalidCursor, Key, Keyset

PageOut = TypeVar("PageOut", bound=BaseModel)  # RunPage, MessagePage


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
    tenant_id: str | None
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


class RunPage(BaseModel):
    """One page of runs; `next_cursor` asks for the next one (null: this is the last)."""

    items: list[RunOut]
    next_cursor: str | None


class MessagePage(BaseModel):
    """One page of messages; `next_cursor` asks for the next one (null: this is the last)."""

    items: list[MessageOut]
    next_cursor: str | None


Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description=f"Page size, at most {MAX_PAGE_SIZE}.")]
Cursor = Annotated[str | None, Query(description="`next_cursor` of the previous page; omit for the first.")]


@dataclass(frozen=True)
class PageQuery:
    """The query parameters of every list: `limit` and `cursor`."""

    limit: Limit = DEFAULT_PAGE_SIZE
    cursor: Cursor = None


def _after(keyset: Keyset, cursor: str | None) -> Key | None:
    if cursor is None:
        return None
    try:
        return keyset.decode(cursor)
    except InvalidCursor as e:
        raise HTTPException(400, str(e)) from None


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
    start: CheckpointStart
    resume_attempts: int
    updated_at: UtcDatetime
    steps: list[ResumeStepOut] = []


# The caller of a read endpoint: a credential allowed to read conversations (their tenant's only).
Reader = Annotated[Principal, requires(Scope.CONVERSATIONS_READ)]
Page = Annotated[PageQuery, Depends()]


def add_routes(app: FastAPI, sessions: async_sessionmaker[AsyncSession]) -> None:
    # Every route here reads; every status it answers is in its document (schemathesis checks).
    responses: dict[int | str, dict[str, Any]] = {
        **AUTH_RESPONSES,
        400: {"description": "A cursor this API did not hand out, or a parameter out of range."},
        404: {"description": "No such run (or none this credential may see), or a path that names nothing."},
    }
    get = partial(app.get, tags=["persistence"], responses=responses)

    async def read_page(
        pages: type[PageOut], keyset: Keyset, query: Select[Any], page: PageQuery, principal: Principal
    ) -> PageOut:
        """One page of what `principal` may see of `query`, in `keyset`'s order."""
        after = _after(keyset, page.cursor)
        async with sessions() as session:
            rows, next_cursor = await queries.read_page(
                session, keyset, queries.visible_to(query, principal), after, page.limit
            )
            return pages.model_validate({"items": [row for (row,) in rows], "next_cursor": next_cursor})

    @get("/v1/runs/{run_id}")
    async def get_run(run_id: str, principal: Reader) -> RunOut:
        async with sessions() as session:
            run = await session.get(Run, run_id)
        if run is None or not queries.may_see(run, principal):
            raise HTTPException(404, f"run {run_id} not found")
        return RunOut.model_validate(run)

    @get("/v1/runs")
    async def list_runs(
        *,
        status: Annotated[list[RunStatus] | None, Query()] = None,
        conversation_key: str | None = None,
        page: Page,
        principal: Reader,
    ) -> RunPage:
        """Runs, newest ending first; `status` may repeat."""
        query = queries.runs(statuses=status or (), conversation=conversation_key)
        return await read_page(RunPage, queries.RUNS, query, page, principal)

    @get("/v1/conversations/{key:path}/runs")
    async def conversation_runs(key: str, page: Page, principal: Reader) -> RunPage:
        """The conversation's runs, oldest start first (another tenant's conversation is empty)."""
        return await read_page(RunPage, queries.CONVERSATION_RUNS, queries.conversation_runs(key), page, principal)

    @get("/v1/conversations/{key:path}/messages")
    async def conversation_messages(key: str, page: Page, principal: Reader) -> MessagePage:
        """The conversation's messages, run by run (oldest start first), each run's in stream order."""
        query = queries.conversation_messages(key)
        return await read_page(MessagePage, queries.CONVERSATION_MESSAGES, query, page, principal)

    @get("/v1/runs/{run_id}/resume-steps")
    async def resume_steps(run_id: str, principal: Principal = requires(Scope.RUNS_RESUME)) -> CheckpointOut:
        """404 when the run has no checkpoint: it completed (or was resumed to completion) or is unknown."""
        async with sessions() as session:
            if not queries.may_see(await session.get(Run, run_id), principal):
                raise HTTPException(404, f"run {run_id} has no resume checkpoint")
            checkpoint = await read_checkpoint(session, run_id)
        if checkpoint is None:
            raise HTTPException(404, f"run {run_id} has no resume checkpoint")
        return checkpoint


async def read_checkpoint(session: AsyncSession, run_id: str) -> CheckpointOut | None:
    """The run's resume checkpoint with its completed steps in order; None when it has none."""
    checkpoint = await session.get(RunCheckpoint, run_id)
    if checkpoint is None:
        return None
    steps = await session.scalars(select(ResumeStep).where(ResumeStep.root_run_id == run_id).order_by(ResumeStep.seq))
    out = CheckpointOut.model_validate(checkpoint)
    out.steps = [ResumeStepOut.model_validate(s) for s in steps]
    return out
