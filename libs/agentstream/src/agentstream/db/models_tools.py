"""Tables owned by the tool-executor: one row per executed tool call.

Migration: `migrations/versions/0009_tool_calls.py`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column

from agentstream.db.models import Base


class ToolCallState(StrEnum):
    RUNNING = "running"  # claimed; the tool may have run (partly) if the executor died
    DONE = "done"  # the result is stored and is what every redelivery publishes


class ToolCallRow(Base):
    """`(run_id, call_id)` executed at most once: claimed before the tool runs, its result kept."""

    __tablename__ = "tool_calls"

    # Text, not a bounded String: a call must never fail to be claimed because of its id's length.
    idempotency_key: Mapped[str] = mapped_column(Text, primary_key=True, doc="run_id:call_id")
    run_id: Mapped[str] = mapped_column(Text)
    call_id: Mapped[str] = mapped_column(Text)
    tool: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), doc="ToolCallState")
    result: Mapped[dict[str, Any] | None] = mapped_column(doc="The ToolCallResult (JSON) once done.")
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]


__all__ = ["ToolCallRow", "ToolCallState"]
