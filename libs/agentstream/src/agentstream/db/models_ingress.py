"""Tables owned by the ingress area: dedupe, pairing, per-conversation overrides.

Migration: `migrations/versions/0006_ingress.py`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from agentstream.db.models import Base


class InboundDedupe(Base):
    """One row per (platform, message id) ever accepted; a second insert means a duplicate."""

    __tablename__ = "inbound_dedupe"

    platform: Mapped[str] = mapped_column(String(64), primary_key=True)
    message_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    received_at: Mapped[datetime]


class PairingCode(Base):
    """An issued pairing code; only its SHA-256 is stored."""

    __tablename__ = "pairing_codes"

    code_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    platform: Mapped[str] = mapped_column(String(64), index=True)
    user_id: Mapped[str] = mapped_column(String(256), index=True)
    chat_id: Mapped[str] = mapped_column(String(256))
    issued_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    approved_at: Mapped[datetime | None]


class PairedUser(Base):
    """A user let through by an approved pairing code."""

    __tablename__ = "paired_users"

    platform: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    approved_at: Mapped[datetime]


class PairingLock(Base):
    """Failed approvals per platform (`*` = approvals that named no platform) and the lockout."""

    __tablename__ = "pairing_locks"

    platform: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    locked_until: Mapped[datetime | None]


class IngressConversation(Base):
    """What ingress remembers per conversation: `/model` override and the last user message (`/retry`)."""

    __tablename__ = "ingress_conversations"

    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    connector_role: Mapped[str | None] = mapped_column(String(128))
    last_message: Mapped[dict[str, Any] | None] = mapped_column(doc="The last InboundMessage (JSON) for /retry.")
    pending_runs: Mapped[dict[str, Any] | None] = mapped_column(
        doc='{"run_ids": [...]}: runs ingress started, newest last; those not yet in `runs` are active/queued.')
    updated_at: Mapped[datetime]
