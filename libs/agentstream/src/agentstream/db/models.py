"""The declarative base and the run history tables: conversations, runs, messages.

persistence writes them; the runner (history), ingress (`/resume`, `/status`) and the CLI read them. The
other tables are in the `models_<area>.py` modules; which service owns each is in docs/architecture.md.
Migrations in `agentstream/db/migrations`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, datetime: DateTime(timezone=True)}


class Conversation(Base):
    __tablename__ = "conversations"

    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    platform: Mapped[str] = mapped_column(String(64))
    chat_id: Mapped[str] = mapped_column(String(256))
    thread_id: Mapped[str | None] = mapped_column(String(256))
    session_id: Mapped[str | None] = mapped_column(String(64), doc="The current history session.")
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Run(Base):
    __tablename__ = "runs"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    root_run_id: Mapped[str] = mapped_column(String(64), index=True)
    parent_run_id: Mapped[str | None] = mapped_column(String(64))
    conversation_key: Mapped[str] = mapped_column(String(512), index=True)
    session_id: Mapped[str | None] = mapped_column(String(64))
    assistant_id: Mapped[str | None] = mapped_column(String(128))
    connector_id: Mapped[str | None] = mapped_column(String(128))
    user_id: Mapped[str | None] = mapped_column(String(256))
    tenant_id: Mapped[str | None] = mapped_column(String(256), index=True, doc="NULL: the default tenant.")
    status: Mapped[str] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text, default="")
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("root_run_id", "seq", "part", name="uq_messages_root_seq_part"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_key: Mapped[str] = mapped_column(String(512), index=True)
    session_id: Mapped[str | None] = mapped_column(String(64))
    root_run_id: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer, doc="seq of the event the message came from.")
    part: Mapped[int] = mapped_column(Integer, default=0, doc="Index when one event holds several messages.")
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    name: Mapped[str | None] = mapped_column(String(128), doc="Tool name for tool summaries.")
    tool_call_id: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime]
