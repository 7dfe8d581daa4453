"""The database writes of a finished run: one transaction per run, safe to repeat.

Inserts skip rows that already exist (`ON CONFLICT DO NOTHING` on SQLite and
PostgreSQL alike), so a re-delivered stream writes nothing twice. A run can finish
more than once (interrupted, then resumed under the same run id): the run row takes
the newest ending; a completed ending deletes the run's resume checkpoint, any other
ending writes it — unless a newer completion is already stored (a re-read stream).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import FinishReason, RunStatus
from agentstream.db import Conversation, Message, Run
from agentstream.db.models_persistence import ResumeStep, RunCheckpoint, RunEventRow
from agentstream_persistence.rows import CheckpointRows, FlushRows

MESSAGE_KEY = ["root_run_id", "seq", "part"]
RUN_ENDING = (
    "status",
    "error",
    "reason",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "llm_calls",
    "duration_ms",
    "finished_at",
    "connector_id",
)
CHECKPOINT_ENDING = ("status", "reason", "error", "last_seq", "usage", "updated_at")


def _insert(session: AsyncSession, table: Any) -> Any:
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    return (postgresql if dialect == "postgresql" else sqlite).insert(table)


async def _upsert_run(session: AsyncSession, run: dict[str, Any]) -> None:
    stmt = _insert(session, Run).values(run)
    newer = stmt.excluded.finished_at > Run.finished_at
    # The watchdog's ending of a run that was only slow arrives after its real one:
    # it must not turn a completed run into a lost one.
    newer = and_(
        newer,
        or_(
            stmt.excluded.reason.is_distinct_from(FinishReason.RUNNER_LOST.value),
            Run.status != RunStatus.COMPLETED.value,
        ),
    )
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=["run_id"], set_={k: getattr(stmt.excluded, k) for k in RUN_ENDING}, where=newer
        )
    )


async def _write_checkpoint(session: AsyncSession, rows: CheckpointRows) -> None:
    stmt = _insert(session, RunCheckpoint).values(rows.checkpoint)
    # `start`, `created_at` and `resume_attempts` stay from the first failure of the run.
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=["root_run_id"],
            set_={k: getattr(stmt.excluded, k) for k in CHECKPOINT_ENDING},
            where=stmt.excluded.last_seq > RunCheckpoint.last_seq,
        )
    )
    if rows.steps:
        await session.execute(
            _insert(session, ResumeStep).on_conflict_do_nothing(index_elements=["root_run_id", "seq"]), rows.steps
        )


async def delete_checkpoint(session: AsyncSession, root_run_id: str) -> None:
    await session.execute(delete(ResumeStep).where(ResumeStep.root_run_id == root_run_id))
    await session.execute(delete(RunCheckpoint).where(RunCheckpoint.root_run_id == root_run_id))


async def write_run(sessions: async_sessionmaker[AsyncSession], rows: FlushRows) -> None:
    await write_runs(sessions, [rows])


async def write_runs(sessions: async_sessionmaker[AsyncSession], runs: list[FlushRows]) -> None:
    """Several finished runs in one transaction, in the order given (the order they ended): one
    commit for the lot, where a transaction per run made the database's commits the bound on
    how many runs a second persistence could store (SQLite shared by the embedded stack)."""
    async with sessions() as session, session.begin():
        for rows in runs:
            await _write(session, rows)


async def _write(session: AsyncSession, rows: FlushRows) -> None:
    await _upsert_run(session, rows.run)
    if rows.messages:
        await session.execute(
            _insert(session, Message).on_conflict_do_nothing(index_elements=MESSAGE_KEY), rows.messages
        )
    if rows.events:  # a resumed run adds the events after its first ending
        await session.execute(
            _insert(session, RunEventRow).on_conflict_do_nothing(index_elements=["root_run_id", "seq"]), rows.events
        )
    conv = _insert(session, Conversation).values(rows.conversation)
    # A re-flushed older run must not move the conversation back in time.
    newer = conv.excluded.updated_at > Conversation.updated_at
    await session.execute(
        conv.on_conflict_do_update(
            index_elements=["key"],
            set_={
                "updated_at": case((newer, conv.excluded.updated_at), else_=Conversation.updated_at),
                "session_id": case(
                    (newer, func.coalesce(conv.excluded.session_id, Conversation.session_id)),
                    else_=Conversation.session_id,
                ),
            },
        )
    )
    root_run_id = rows.run["root_run_id"]
    if rows.completed:
        await delete_checkpoint(session, root_run_id)
    elif rows.checkpoint is not None:
        stored = await session.scalar(select(Run.status).where(Run.run_id == root_run_id))
        if stored != RunStatus.COMPLETED:  # else: a re-read ending of a run since resumed to completion
            await _write_checkpoint(session, rows.checkpoint)


async def claim_resume(sessions: async_sessionmaker[AsyncSession], root_run_id: str, max_attempts: int) -> int | None:
    """Count one more automatic resume of the run; its number, or None when the budget is spent."""
    async with sessions() as session, session.begin():
        result = await session.execute(
            update(RunCheckpoint)
            .where(RunCheckpoint.root_run_id == root_run_id, RunCheckpoint.resume_attempts < max_attempts)
            .values(resume_attempts=RunCheckpoint.resume_attempts + 1)
            .returning(RunCheckpoint.resume_attempts)
        )
        return result.scalar_one_or_none()


async def stored_runs(sessions: async_sessionmaker[AsyncSession], run_ids: list[str]) -> set[str]:
    """Which of `run_ids` have a `runs` row."""
    async with sessions() as session:
        return set(await session.scalars(select(Run.run_id).where(Run.run_id.in_(run_ids))))
