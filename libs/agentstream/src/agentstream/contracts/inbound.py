"""`inbound` topic: what users and webhooks produce.

Key: the conversation key ``platform:chat_id[:thread_id]`` (see `conversation_key`).
This is the public contract users build on; keep it stable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentstream.contracts.base import Record


def conversation_key(platform: str, chat_id: str, thread_id: str | None = None) -> str:
    """The Kafka key of every run-scoped record of one conversation."""
    key = f"{platform}:{chat_id}"
    return f"{key}:{thread_id}" if thread_id else key


class User(BaseModel):
    """The person (or system) who sent the message."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, description="Platform user id; the identity used for permission.")
    name: str | None = Field(default=None, description="Display name.")
    team_id: str | None = Field(default=None, description="Team / guild / workspace id.")
    tenant_id: str | None = Field(default=None, description="Tenant id for billing and isolation.")


class Attachment(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str = Field(description="Where the attachment can be fetched.")
    mime_type: str | None = None
    name: str | None = None


class InboundMessage(Record):
    """A message from a user on some platform, produced to `inbound`."""

    type: Literal["inbound.message"] = "inbound.message"
    id: str = Field(min_length=1, description="Idempotency key, unique per platform.")
    platform: str = Field(min_length=1, description="telegram, slack, discord, signal, web, console, memory, …")
    chat_id: str = Field(min_length=1, description="Chat / channel id on the platform.")
    thread_id: str | None = Field(default=None, description="Thread / topic id inside the chat.")
    user: User
    text: str = Field(description="The message text.")
    attachments: list[Attachment] = Field(default_factory=list)
    reply_to_id: str | None = Field(default=None, description="Platform message id this replies to.")
    profile: str | None = Field(default=None, description="Profile to route to (else routes decide).")
    assistant_id: str | None = Field(default=None, description="Assistant to run (else the profile's).")
    metadata: dict[str, Any] = Field(default_factory=dict)
    sent_at: datetime | None = None

    @property
    def conversation_key(self) -> str:
        return conversation_key(self.platform, self.chat_id, self.thread_id)
