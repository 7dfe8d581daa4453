"""What `agentstream runs` reads from the database: runs, their messages, resume checkpoints.

The rows are the ones persistence writes (`runs`, `messages`, `run_checkpoints`,
`resume_steps`); the shapes are persistence's read API models, so `--json` prints what
`GET /v1/runs/{id}` and `GET /v1/runs/{id}/resume-steps` return. The list pages like
`GET /v1/runs` (same order, same cursors).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.db import Message, Run, create_engine, session_factory
from agentstream.db.models_persistence import RunCheckpoint
from agentstream_persistence import queries
from agentstream_persistence.api import CheckpointOut, MessageOut, RunOut, read_checkpoint
from agentstream_persistence.pages import Key
from agentstream_stack.cli_errors import command_line


class RunsUnavailable(Exception):
    """The database cannot answer: not created yet, not migrated, or unreachable."""


class AmbiguousRunId(Exception):
    def __init__(self, prefix: str, matches: list[str]) -> None:
        super().__init__(f"{prefix!r} matches several runs: {', '.join(matches)}")


class RunListItem(RunOut):
    checkpoint: bool  # a resume checkpoint exists: `agentstream runs resume` can continue the run


class RunListPage(BaseModel):
    items: list[RunListItem]
    next_cursor: str | None  # `--cursor` for the next page; None on the last


class RunDetail(BaseModel):
    run: RunOut
    messages: list[MessageOut]
    checkpoint: CheckpointOut | None  # with its completed steps, in order


@asynccontextmanager
async def open_runs_db(url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    u = make_url(url)
    sqlite_file = u.database if u.get_backend_name() == "sqlite" and u.database != ":memory:" else None
    if sqlite_file and not Path(sqlite_file).exists():  # noqa: ASYNC240 - one stat of a local file
        # Connecting would create an empty file: say where the database was expected instead.
        raise RunsUnavailable(
            f"no database at {sqlite_file}: start the stack ({command_line('up')}) "
            "or point --config / AGENTSTREAM__DATABASE__URL at it"
        )
    engine = create_engine(url)
    try:
        yield session_factory(engine)
    except DBAPIError as e:  # no such table / relation does not exist / connection refused
        raise RunsUnavailable(
            f"{type(e.orig).__name__}: {e.orig} (is the database migrated? {command_line('db upgrade')})"
        ) from e
    finally:
        await engine.dispose()


async def list_runs(
    url: str,
    *,
    statuses: list[str] | None = None,
    conversation: str | None = None,
    resumable: bool = False,
    limit: int = 20,
    after: Key | None = None,
) -> RunListPage:
    """Newest ending first (a resumed run's row carries its latest ending), past `after` (a decoded cursor)."""
    query = (
        queries.runs(statuses=statuses or (), conversation=conversation)
        .add_columns(RunCheckpoint.root_run_id)
        .outerjoin(RunCheckpoint, RunCheckpoint.root_run_id == Run.run_id)
    )
    if resumable:
        query = query.where(RunCheckpoint.root_run_id.is_not(None))
    async with open_runs_db(url) as sessions, sessions() as session:
        rows, next_cursor = await queries.read_page(session, queries.RUNS, query, after, limit)
    items = [
        RunListItem.model_validate({**RunOut.model_validate(run).model_dump(), "checkpoint": cp is not None})
        for run, cp in rows
    ]
    return RunListPage(items=items, next_cursor=next_cursor)


async def _resolve(session: AsyncSession, run_id: str) -> str | None:
    """The exact run id, else the one run id starting with it (ids are shown shortened, e.g. by /resume)."""
    if await session.get(Run, run_id) is not None:
        return run_id
    matches = list(
        await session.scalars(
            select(Run.run_id).where(Run.run_id.startswith(run_id, autoescape=True)).order_by(Run.run_id).limit(5)
        )
    )
    if len(matches) > 1:
        raise AmbiguousRunId(run_id, matches)
    return matches[0] if matches else None


async def show_run(url: str, run_id: str) -> RunDetail | None:
    """The run, its stored messages and its checkpoint; None when no run id is or starts with `run_id`."""
    async with open_runs_db(url) as sessions, sessions() as session:
        resolved = await _resolve(session, run_id)
        if resolved is None:
            return None
        run = await session.get(Run, resolved)
        assert run is not None
        messages = await session.scalars(
            select(Message).where(Message.root_run_id == resolved).order_by(Message.seq, Message.part)
        )
        return RunDetail(
            run=RunOut.model_validate(run),
            messages=[MessageOut.model_validate(m) for m in messages],
            checkpoint=await read_checkpoint(session, resolved),
        )
