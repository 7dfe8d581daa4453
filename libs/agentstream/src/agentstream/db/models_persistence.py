"""Tables owned by the persistence area: resume checkpoints and history sessions.

Migration: `migrations/versions/0003_resume_sessions.py`.

A run that ends `failed` or `interrupted` leaves a checkpoint: one `run_checkpoints`
row (how it ended, usage so far, the last seq, what the runner needs to rebuild the
run) and one `resume_steps` row per completed step (its output and memory snapshot).
Both are deleted when a resume of the run completes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from agentstream.db.models import Base


class RunCheckpoint(Base):
    __tablename__ = "run_checkpoints"

    root_run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_key: Mapped[str] = mapped_column(String(512), index=True)
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    last_seq: Mapped[int] = mapped_column(Integer, doc="seq of the run.finished: a resume continues after it.")
    usage: Mapped[dict[str, Any]] = mapped_column(doc="Usage of the LLM calls so far (not billed again).")
    start: Mapped[dict[str, Any]] = mapped_column(doc="assistant, user, reply target, session, input.")
    resume_attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class ResumeStep(Base):
    __tablename__ = "resume_steps"
    __table_args__ = (UniqueConstraint("root_run_id", "seq", name="uq_resume_steps_root_seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    root_run_id: Mapped[str] = mapped_column(String(64), index=True)
    run_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer, doc="seq of the step.completed event.")
    step_id: Mapped[str] = mapped_column(String(128))
    step_type: Mapped[str] = mapped_column(String(32))
    input: Mapped[dict[str, Any]]
    output: Mapped[dict[str, Any]]
    memory: Mapped[list[Any]] = mapped_column(JSON, doc="The run's messages after this step (ChatMessage dicts).")
    created_at: Mapped[datetime]


class ChatSession(Base):
    """A history session of a conversation; a reset ends the current one and opens a new one."""

    __tablename__ = "sessions"

    session_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_key: Mapped[str] = mapped_column(String(512), index=True)
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    end_reason: Mapped[str | None] = mapped_column(String(64))


class RunEventRow(Base):
    """One event of a run's visible stream, archived at flush (migration `0012_run_events`): what
    `agentstream replay` re-publishes. Only the events a chat shows (`contracts.replay.ARCHIVED_TYPES`),
    their text redacted like the messages'."""

    __tablename__ = "run_events"
    __table_args__ = (UniqueConstraint("root_run_id", "seq", name="uq_run_events_root_seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    root_run_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(32))
    event: Mapped[dict[str, Any]] = mapped_column(JSON, doc="The event record as on the topic (JSON).")
    created_at: Mapped[datetime] = mapped_column(index=True)
