"""Tables owned by the delivery area (add models here; migrations in migrations/versions)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Float, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from agentstream.db.models import Base

__all__ = ["Base"]


# -- hooks: billing and audit (migration 0005_delivery_hooks) ----------------------------


class Usage(Base):
    """Billing: one row per finished root run (the primary key makes a replay a no-op)."""

    __tablename__ = "usage"

    root_run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_key: Mapped[str] = mapped_column(String(512), index=True)
    tenant_id: Mapped[str | None] = mapped_column(String(256), index=True)
    user_id: Mapped[str | None] = mapped_column(String(256), index=True)
    assistant_id: Mapped[str | None] = mapped_column(String(128), index=True)
    connector_id: Mapped[str | None] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(32))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    finished_at: Mapped[datetime]


class AuditLog(Base):
    """Append-only log of lifecycle events; (event_id, point) is unique so a replay adds nothing."""

    __tablename__ = "audit_log"
    __table_args__ = (UniqueConstraint("event_id", "point", name="uq_audit_log_event_point"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(64))
    point: Mapped[str] = mapped_column(String(64), index=True)
    conversation_key: Mapped[str] = mapped_column(String(512), index=True)
    root_run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    data: Mapped[dict[str, Any]]
    at: Mapped[datetime]


# -- delivery ledger (migration 0004_delivery_ledger) ------------------------------------


class DeliveryLedger(Base):
    """One platform message of a run at one target: the send intent and what landed.

    Written before each platform call (`pending → sending → sent | unknown | failed`), so
    a restarted delivery edits the messages it had posted instead of posting new ones.
    `reapply_at` (epoch seconds, migration 0008) is set while a call of unknown outcome may
    still land on the message: its final text is re-applied once that time has passed.
    """

    __tablename__ = "delivery_ledger"
    __table_args__ = (
        UniqueConstraint("platform", "chat_id", "root_run_id", "segment", name="uq_delivery_ledger_target_segment"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(64))
    chat_id: Mapped[str] = mapped_column(String(256))
    root_run_id: Mapped[str] = mapped_column(String(64), index=True)
    segment: Mapped[int] = mapped_column(Integer)
    conversation_key: Mapped[str] = mapped_column(String(512))
    state: Mapped[str] = mapped_column(String(16))
    platform_message_id: Mapped[str | None] = mapped_column(String(128))
    text_length: Mapped[int] = mapped_column(Integer, default=0)
    text_sha256: Mapped[str | None] = mapped_column(String(64))
    final: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(String(512))
    updated_at: Mapped[datetime]
    reapply_at: Mapped[float | None] = mapped_column(Float)


# -- orphan stubs to find (migration 0013_delivery_orphans) -------------------------------


class DeliveryOrphan(Base):
    """A send of unknown outcome that may have posted a message delivery cannot address: what it
    sent, so the stream can find that message and delete it once `lands_by` (epoch seconds) has
    passed, also after a restart (docs/delivery.md, "Orphan stubs"). Deleted once searched for."""

    __tablename__ = "delivery_orphans"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(64))
    chat_id: Mapped[str] = mapped_column(String(256))
    root_run_id: Mapped[str] = mapped_column(String(64), index=True)
    segment: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)  # the body as sent: the probe must match it exactly
    markup: Mapped[str] = mapped_column(String(32))
    floor: Mapped[int | None] = mapped_column(BigInteger)
    lands_by: Mapped[float] = mapped_column(Float)
