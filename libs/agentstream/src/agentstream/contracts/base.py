"""Base record shared by every topic value.

Every record on every topic is a JSON object with ``type`` (the discriminator),
``id`` (uuid), ``ts`` (UTC timestamp) and ``v`` (schema version). Unknown fields
are ignored so producers may add fields without breaking older consumers.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


def new_id() -> str:
    return str(uuid.uuid4())


def utcnow() -> datetime:
    return datetime.now(UTC)


class Record(BaseModel):
    """Common envelope fields of every topic record."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(default_factory=new_id, description="Unique record id (uuid4).")
    ts: datetime = Field(default_factory=utcnow, description="When the record was created (UTC).")
    v: int = Field(default=SCHEMA_VERSION, description="Schema version of the record.")

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()
