"""`deliveries` topic: delivery ledger transitions. Key: conversation key."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from agentstream.contracts.base import Record


class LedgerState(StrEnum):
    """Where one platform message's latest call stands.

    `pending → sending → sent | unknown | failed`: only `sending` and `unknown` mean
    the platform may have received something delivery does not know the outcome of.
    """

    PENDING = "pending"  # the call is intended but has not left (waiting for the chat's slot)
    SENDING = "sending"  # written immediately before the HTTP call leaves
    SENT = "sent"  # the platform answered: it shows this text
    UNKNOWN = "unknown"  # the call went out and no answer came back (timeout, crash mid-call)
    FAILED = "failed"  # the platform refused it (too long, forbidden, …)


class DeliveryReceipt(Record):
    """One transition of a (platform, chat, root run, segment) send intent.

    A notice (not part of a run's stream) has a ledger row of its own: `root_run_id` is
    the notice record's id and `segment` 0.
    """

    type: Literal["delivery.receipt"] = "delivery.receipt"
    conversation_key: str
    root_run_id: str
    platform: str
    chat_id: str
    segment: int = Field(description="0-based index of the platform message within the run.")
    state: LedgerState
    platform_message_id: str | None = None
    text_length: int = 0
    text_sha256: str | None = None
    final: bool = False
    error: str | None = None
