"""Base record shared by every topic value.

Every record on every topic is a JSON object with ``type`` (the discriminator),
``id`` (uuid), ``ts`` (UTC timestamp) and ``v`` (schema version). Unknown fields
are ignored so producers may add fields without breaking older consumers.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class RecordType(StrEnum):
    """The `type` discriminator of every record on every topic (docs/topics.md): what code
    compares a record's `type` with.

    Each record class spells its own `type` as a plain string `Literal`: pydantic serializes a
    `Literal` of an enum member about twice as slowly, on every record. A unit test keeps the
    two in step (tests/unit/lib/test_contracts_enums.py)."""

    # inbound
    INBOUND_MESSAGE = "inbound.message"
    # runs
    RUN_START = "run.start"
    RUN_INTERRUPT = "run.interrupt"
    RUN_RESUME = "run.resume"
    CONVERSATION_RESET = "conversation.reset"
    RUN_APPROVAL = "run.approval"
    # events
    RUN_QUEUED = "run.queued"
    RUN_STARTED = "run.started"
    MESSAGE_STARTED = "message.started"
    MESSAGE_DELTA = "message.delta"
    MESSAGE_COMPLETED = "message.completed"
    TOOL_CALL = "tool.call"
    TOOL_RESULT = "tool.result"
    SEGMENT_BREAK = "segment.break"
    STEP_STARTED = "step.started"
    STEP_COMPLETED = "step.completed"
    STEP_FAILED = "step.failed"
    RUN_HEARTBEAT = "run.heartbeat"
    TOOL_HEARTBEAT = "tool.heartbeat"
    NOTICE = "notice"
    RUN_FINISHED = "run.finished"
    # tool-calls, tool-results
    TOOL_CALL_REQUEST = "tool.call_request"
    TOOL_CALL_RESULT = "tool.call_result"
    # tool-catalog
    TOOL_CATALOG_ENTRY = "tool.catalog_entry"
    # deliveries
    DELIVERY_RECEIPT = "delivery.receipt"
    # web-frames
    WEB_FRAME = "web.frame"
    # dlq
    DEAD_LETTER = "dead_letter"


# The variant nibble of an RFC 4122 UUID: 10xx in binary.
_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def new_id() -> str:
    """A random (version 4) UUID string, as `str(uuid.uuid4())`, without building a
    `uuid.UUID` (two thirds of its cost; every record has an id)."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def utcnow() -> datetime:
    return datetime.now(UTC)


class Value(BaseModel):
    """Base of every record and of the values inside one (a reply target, a chat message, …):
    frozen, and unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Record(Value):
    """Common envelope fields of every topic record."""

    id: str = Field(default_factory=new_id, description="Unique record id (uuid4).")
    ts: datetime = Field(default_factory=utcnow, description="When the record was created (UTC).")
    v: int = Field(default=SCHEMA_VERSION, description="Schema version of the record.")

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()
