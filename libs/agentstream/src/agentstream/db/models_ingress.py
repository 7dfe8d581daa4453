"""Tables owned by the ingress area: dedupe, pairing, per-conversation overrides.

Migrations: `migrations/versions/0006_ingress.py`, `0008_dedupe_source.py`, `0014_ingress_outbox.py`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Integer, PrimaryKeyConstraint, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from agentstream.db.models import Base


class InboundDedupe(Base):
    """One row per (source, platform, message id) ever accepted; a second insert means a
    duplicate. The source (`InboundMessage.dedupe_key`) keeps one entrance from
    suppressing another's messages by claiming their ids first."""

    __tablename__ = "inbound_dedupe"
    __table_args__ = (PrimaryKeyConstraint("source", "platform", "message_id", name="pk_inbound_dedupe"),)

    source: Mapped[str] = mapped_column(String(256))
    platform: Mapped[str] = mapped_column(String(64))
    message_id: Mapped[str] = mapped_column(String(256))
    received_at: Mapped[datetime]


class InboundOutbox(Base):
    """A message the front door accepted (202) while the broker keeps its records in memory,
    kept until its run has ended (a `runs` row for `run_id`) or ingress decided it was no run:
    a restarted embedded broker lost it, and ingress sends it again (docs/decisions.md
    "Broker loss"). `partition`/`offset`: where it first landed in `inbound` (NULL until
    the broker acked it), from which its run id derives, so a re-sent copy is the same run."""

    __tablename__ = "ingress_outbox"
    __table_args__ = (PrimaryKeyConstraint("source", "platform", "message_id", name="pk_ingress_outbox"),)

    source: Mapped[str] = mapped_column(String(256))
    platform: Mapped[str] = mapped_column(String(64))
    message_id: Mapped[str] = mapped_column(String(256))
    message: Mapped[str] = mapped_column(Text)  # the InboundMessage's JSON as produced
    partition: Mapped[int | None] = mapped_column(Integer)
    offset: Mapped[int | None] = mapped_column(BigInteger)
    run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    accepted_at: Mapped[datetime]


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
        doc='{"run_ids": [...]}: runs ingress started, newest last; those not yet in `runs` are active/queued.'
    )
    updated_at: Mapped[datetime]
