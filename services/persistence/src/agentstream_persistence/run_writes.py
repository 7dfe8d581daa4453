"""The database writes of finished runs: one transaction per batch of runs, safe to repeat.

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


def _run_upsert(session: AsyncSession) -> Any:
    # Core tables, not the ORM classes: the ORM's bulk path split a list of rows into runs of rows
    # alike (which optional values are set), often one statement a row.
    run = Run.__table__.c
    stmt = _insert(session, Run.__table__)
    newer = stmt.excluded.finished_at > run.finished_at
    # The watchdog's ending of a run that was only slow arrives after its real one:
    # it must not turn a completed run into a lost one.
    newer = and_(
        newer,
        or_(
            stmt.excluded.reason.is_distinct_from(FinishReason.RUNNER_LOST.value),
            run.status != RunStatus.COMPLETED.value,
        ),
    )
    return stmt.on_conflict_do_update(
        index_elements=["run_id"], set_={k: getattr(stmt.excluded, k) for k in RUN_ENDING}, where=newer
    )


def _conversation_upsert(session: AsyncSession) -> Any:
    stored = Conversation.__table__.c
    conv = _insert(session, Conversation.__table__)
    # A re-flushed older run must not move the conversation back in time.
    newer = conv.excluded.updated_at > stored.updated_at
    return conv.on_conflict_do_update(
        index_elements=["key"],
        set_={
            "updated_at": case((newer, conv.excluded.updated_at), else_=stored.updated_at),
            "session_id": case(
                (newer, func.coalesce(conv.excluded.session_id, stored.session_id)),
                else_=stored.session_id,
            ),
        },
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


async def write_run(sessions: async_sessionmaker[AsyncSession], rows: FlushRows) -> None:
    await write_runs(sessions, [rows])


async def write_runs(sessions: async_sessionmaker[AsyncSession], runs: list[FlushRows]) -> None:
    """Several finished runs in one transaction, in the order given (the order they ended): one
    commit for the lot, where a transaction per run made the database's commits the bound on
    how many runs a second persistence could store (SQLite shared by the embedded stack).

    Each kind of row is one statement for every run (executed once per row, in the runs' order, so
    each conditional upsert sees the rows of the runs before it, as one transaction per run would):
    a handful of statements per batch, not five per run. On SQLite every statement is a hop to the
    driver's thread and back through the event loop, with the database's one write lock held
    throughout: at ~17 runs/s a batch of a hundred runs held it for seconds on a busy loop, and the
    other services sharing the file gave up waiting for it (`database is locked`)."""
    if not runs:
        return
    async with sessions() as session, session.begin():
        await session.execute(_run_upsert(session), [rows.run for rows in runs])
        if messages := [m for rows in runs for m in rows.messages]:
            await session.execute(
                _insert(session, Message.__table__).on_conflict_do_nothing(index_elements=MESSAGE_KEY), messages
            )
        if events := [e for rows in runs for e in rows.events]:  # a resumed run adds the events after its first ending
            await session.execute(
                _insert(session, RunEventRow.__table__).on_conflict_do_nothing(index_elements=["root_run_id", "seq"]),
                events,
            )
        await session.execute(_conversation_upsert(session), [rows.conversation for rows in runs])
        if completed := [rows.run["root_run_id"] for rows in runs if rows.completed]:
            await session.execute(delete(ResumeStep).where(ResumeStep.root_run_id.in_(completed)))
            await session.execute(delete(RunCheckpoint).where(RunCheckpoint.root_run_id.in_(completed)))
        for rows in runs:
            if not rows.completed and rows.checkpoint is not None:
                await _keep_checkpoint(session, rows.run["root_run_id"], rows.checkpoint)


async def _keep_checkpoint(session: AsyncSession, root_run_id: str, checkpoint: CheckpointRows) -> None:
    stored = await session.scalar(select(Run.status).where(Run.run_id == root_run_id))
    if stored != RunStatus.COMPLETED:  # else: a re-read ending of a run since resumed to completion
        await _write_checkpoint(session, checkpoint)


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
