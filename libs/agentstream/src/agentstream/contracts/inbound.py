"""`inbound` topic: what users and webhooks produce.

Key: the conversation key ``[tenant/]platform:chat_id[:thread_id]`` (see `agentstream.contracts.keys`).
This is the public contract users build on; keep it stable.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationInfo, model_validator

from agentstream.contracts.base import Record, Value
from agentstream.contracts.keys import conversation_key as conversation_key  # its home before keys.py
from agentstream.contracts.keys import tenant_scoped
from agentstream.contracts.limits import MAX_CONVERSATION_KEY, MAX_NAME
from agentstream.contracts.unicode import unencodable

# Ids end up in Kafka keys, database columns and log lines: bounded, and no control
# characters (C0, DEL, C1). The widths keep `platform:chat_id:thread_id` within the
# 512 characters of every conversation-key column. Ids are JSON strings: a number, a
# bool or an object is refused, never turned into text.
NO_CONTROL_CHARS = r"^[^\x00-\x1f\x7f-\x9f]*$"
MAX_ID = 256
# A key reads `[tenant/]platform:chat…`: a platform without `/` and a tenant without `/` or `:` keep
# every (tenant, platform, chat, thread) its own key (no tenant's key can pass for another's).
PlatformName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f-\x9f/]*$")]
TenantId = Annotated[str, StringConstraints(max_length=MAX_ID, pattern=r"^[^\x00-\x1f\x7f-\x9f/:]*$")]
ChatId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=NO_CONTROL_CHARS)]
ThreadId = Annotated[str, StringConstraints(max_length=200, pattern=NO_CONTROL_CHARS)]
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID, pattern=NO_CONTROL_CHARS)]
OptionalIdentifier = Annotated[str, StringConstraints(max_length=MAX_ID, pattern=NO_CONTROL_CHARS)]

DedupeKey = tuple[str, str, str]  # (source, platform, message id)

# Where a message entered (`InboundMessage.source`); none means produced straight to Kafka.
KAFKA_SOURCE = "kafka"
API_SOURCE = "api"


def webhook_source(platform: str, bot: str | None = None) -> str:
    """`webhook:<platform>` or, for a platform with several bots, `webhook:<platform>:<bot>`."""
    return f"webhook:{platform}:{bot}" if bot else f"webhook:{platform}"


def api_source(key_id: str | None = None) -> str:
    """`api:<key id>` for a message posted with an API key, `api` before keys exist."""
    return f"{API_SOURCE}:{key_id}" if key_id else API_SOURCE


class KnownPlatform(StrEnum):
    """The platforms agentstream ships adapters for. `platform` fields stay open text: a
    webhook-defined platform may carry any name (docs/delivery.md)."""

    TELEGRAM = "telegram"
    SLACK = "slack"
    DISCORD = "discord"
    SIGNAL = "signal"
    WEBHOOK = "webhook"
    WEB = "web"
    CONSOLE = "console"
    MEMORY = "memory"


class User(Value):
    """The person (or system) who sent the message."""

    id: Identifier = Field(description="Platform user id; the identity used for permission.")
    name: str | None = Field(default=None, description="Display name.")
    team_id: OptionalIdentifier | None = Field(default=None, description="Team / guild / workspace id.")
    tenant_id: TenantId | None = Field(
        default=None, description="Tenant id for billing and isolation (no `/` or `:`: it is part of the key)."
    )


class Attachment(Value):
    """A file sent with the message."""

    url: str = Field(description="Where the attachment can be fetched.")
    mime_type: str | None = None
    name: str | None = None


class InboundMessage(Record):
    """A message from a user on some platform, produced to `inbound`."""

    type: Literal["inbound.message"] = "inbound.message"
    id: Identifier = Field(description="Idempotency key, unique per source and platform.")
    platform: PlatformName = Field(description="telegram, slack, discord, signal, web, console, memory, …")
    chat_id: ChatId = Field(description="Chat / channel id on the platform.")
    thread_id: ThreadId | None = Field(default=None, description="Thread / topic id inside the chat.")
    user: User
    text: str = Field(description="The message text.")
    attachments: list[Attachment] = Field(default_factory=list)
    reply_to_id: OptionalIdentifier | None = Field(default=None, description="Platform message id this replies to.")
    profile: str | None = Field(default=None, description="Profile to route to (else routes decide).")
    assistant_id: Annotated[str, StringConstraints(max_length=MAX_NAME)] | None = Field(
        default=None, description="Assistant to run (else the profile's)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    sent_at: datetime | None = None
    source: OptionalIdentifier | None = Field(
        default=None,
        description="Where the message entered, set by ingress's front door: `webhook:telegram:<bot>`, "
        "`webhook:slack`, `api:<key id>`. Records produced straight to Kafka leave it empty, which counts "
        "as source `kafka`. Part of the dedupe key, so one source cannot suppress another's messages.",
    )

    @model_validator(mode="after")
    def _valid_unicode(self, info: ValidationInfo) -> InboundMessage:
        # Python's json accepts an escaped lone surrogate; no record can be written with one.
        # pydantic's own JSON parser refuses it (and bytes that are no UTF-8), so a record
        # decoded from JSON (every consumed one) needs no walk of its text.
        if info.mode != "json" and (reason := unencodable(self)) is not None:
            raise ValueError(reason)
        return self

    @model_validator(mode="after")
    def _key_fits(self) -> InboundMessage:
        if len(self.conversation_key) > MAX_CONVERSATION_KEY:
            raise ValueError(
                f"tenant, platform, chat_id and thread_id make a conversation key longer than "
                f"{MAX_CONVERSATION_KEY} characters"
            )
        return self

    @property
    def conversation_key(self) -> str:
        """The tenant is part of it: two tenants' chats of the same ids are two conversations."""
        return conversation_key(self.platform, self.chat_id, self.thread_id, tenant_id=self.user.tenant_id)

    @property
    def dedupe_key(self) -> DedupeKey:
        """(source, platform, id): a message id is unique per source, platform and tenant (a gateway
        relaying several tenants must not let one suppress another's message by reusing its id)."""
        source = tenant_scoped(self.user.tenant_id, self.source or KAFKA_SOURCE)
        if len(source) > MAX_ID:  # the dedupe table's width: a long tenant and source hashed together
            source = "h." + hashlib.sha256(source.encode()).hexdigest()
        return (source, self.platform, self.id)
