"""`deliveries` topic: delivery ledger transitions. Key: conversation key."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentstream.contracts.base import Record

LedgerState = Literal["pending", "sending", "sent", "unknown", "failed"]


class DeliveryReceipt(Record):
    """One transition of a (platform, chat, root run, segment) send intent."""

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
