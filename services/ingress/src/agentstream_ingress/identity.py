"""Who a message posted over HTTP is from: the credential decides, never the body.

- A *gateway* principal (scope `gateway`, on one of its platforms, or `admin`) is an adapter of
  ours or the user's: it relays end users' messages and asserts their identities as given.
- Every other principal (`messages:write`) speaks only for itself: its pinned end user
  (`platform`/`user_id` of a personal key or a JWT), else the `api` platform and user
  `key.<key id>`. Its messages go to its own direct chat (chat id = its user id); `thread_id`
  keeps several conversations apart.
  A body that claims anything else is refused, and nothing is produced.
Either way the tenant is the credential's (an operator's all-tenants credential keeps the body's),
and a profile may be named only if the credential lists it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentstream.auth import DEFAULT_TENANT, Principal, Scope
from agentstream.contracts import Attachment, InboundMessage, User, new_id
from agentstream.contracts.inbound import ChatId, Identifier, OptionalIdentifier, PlatformName, ThreadId, api_source

API_PLATFORM = "api"  # messages of principals that speak for themselves; answers are read from events/persistence


class PostedMessage(BaseModel):
    """The body of `POST /v1/messages`: an `InboundMessage` whose identity fields the credential fills in."""

    model_config = ConfigDict(extra="ignore")

    # The contract's id types: a body that breaks them is a 422 here, not an error later.
    id: Identifier = Field(
        default_factory=new_id,
        description="Idempotency key (per credential); a fresh one when omitted.",
    )
    platform: PlatformName | None = Field(
        default=None,
        description="Gateway credentials only; others default to their own platform.",
    )
    chat_id: ChatId | None = Field(
        default=None,
        description="Gateway credentials; others post to their own direct chat.",
    )
    thread_id: ThreadId | None = Field(default=None, min_length=1, description="A conversation inside the chat.")
    user: User | None = Field(default=None, description="Gateway credentials only; others are themselves.")
    text: str = Field(description="The message text.")
    attachments: list[Attachment] = Field(default_factory=list)
    reply_to_id: OptionalIdentifier | None = None
    profile: str | None = Field(default=None, description="A profile the credential may use.")
    assistant_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    sent_at: datetime | None = None


def source_of(principal: Principal) -> str:
    """`api:<credential>`: the dedupe namespace of its posts (a long or odd subject, e.g. a JWT's, is hashed)."""
    subject = principal.subject
    if len(subject) > 128 or not subject.isprintable():
        subject = "h." + hashlib.sha256(subject.encode()).hexdigest()[:32]
    return api_source(subject)


@dataclass(frozen=True)
class Refused:
    detail: str


def _tenant(principal: Principal, claimed: str | None) -> str:
    return (claimed or DEFAULT_TENANT) if principal.all_tenants else principal.tenant_id


def bind_identity(post: PostedMessage, principal: Principal) -> InboundMessage | Refused:
    if post.profile is not None and not principal.has(Scope.ADMIN) and post.profile not in principal.profiles:
        return Refused(f"this credential may not choose profile {post.profile!r}")
    fields = post.model_dump(exclude={"platform", "chat_id", "user"})
    if post.platform is not None and principal.may_assert(post.platform):
        if post.user is None or post.chat_id is None:
            return Refused("a gateway message names its platform, chat_id and user")
        user = post.user.model_copy(update={"tenant_id": _tenant(principal, post.user.tenant_id)})
        return InboundMessage(**fields, platform=post.platform, chat_id=post.chat_id, user=user)
    if not principal.has(Scope.MESSAGES_WRITE):
        return Refused(
            f"this credential lacks the {Scope.MESSAGES_WRITE.value!r} scope"
            + (f" (and may not speak for {post.platform} users)" if post.platform else "")
        )
    platform = principal.platform or API_PLATFORM
    user_id = principal.user_id or f"key.{principal.subject}"
    if post.platform is not None and post.platform != platform:
        return Refused(f"this credential speaks for {platform} users; it may not post as {post.platform!r}")
    if post.user is not None and (post.user.id != user_id or post.user.team_id or post.user.tenant_id):
        return Refused(f"this credential speaks for user {user_id!r} only")
    if post.chat_id is not None and post.chat_id != user_id:
        return Refused(f"this credential may post only to its own direct chat {user_id!r}; use thread_id")
    name = post.user.name if post.user is not None else principal.name
    user = User(id=user_id, name=name, tenant_id=_tenant(principal, None))
    return InboundMessage(**fields, platform=platform, chat_id=user_id, user=user)
