"""`dlq` topic: records no service could use. Key: the original key."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentstream.contracts.base import Record


class DeadLetter(Record):
    """A record that could not be processed, with the reason."""

    type: Literal["dead_letter"] = "dead_letter"
    source_topic: str
    source_partition: int | None = None
    source_offset: int | None = None
    key: str | None = None
    raw_value: str = Field(description="The original value, decoded as UTF-8 with replacement.")
    error: str = Field(description="Readable reason, e.g. 'chat_id: Field required'.")
    service: str

    def coordinates(self) -> dict[str, Any]:
        """Where the record sat, as log fields."""
        return {"topic": self.source_topic, "partition": self.source_partition, "offset": self.source_offset}
