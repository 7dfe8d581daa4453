"""Parse and validate one raw `inbound` record against the InboundMessage contract (the
pipeline's first check, docs/ingress.md); a bad one is dead-lettered, its sender told if known."""

from __future__ import annotations

import json

from pydantic import BaseModel, TypeAdapter, ValidationError

from agentstream.contracts import InboundMessage, ReplyTarget
from agentstream.contracts.inbound import ChatId, PlatformName, TenantId, ThreadId
from agentstream.kafka.decoding import Undecodable, decode_record
from agentstream_ingress.decisions import DeadLetterDecision

InboundMessageAdapter = TypeAdapter(InboundMessage)


class _Target(BaseModel):
    """The reply target's fields under the contract's constraints: a chat id too long or
    with control characters is no place to send a notice to."""

    platform: PlatformName
    chat_id: ChatId
    thread_id: ThreadId | None = None
    tenant_id: TenantId | None = None  # the notice goes to this tenant's chat, not another's


def _numeric_as_text(value: object) -> object:
    """A numeric id still says where to answer (the message itself is refused for it)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def reply_target_of(raw: bytes) -> ReplyTarget | None:
    """Best effort: where to tell the user their message was bad."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # "[" * 5000 recurses past the limit
        return None
    if not isinstance(data, dict):
        return None
    chat, thread = (_numeric_as_text(data.get(k)) for k in ("chat_id", "thread_id"))
    user = data.get("user")
    tenant = user.get("tenant_id") if isinstance(user, dict) else None
    try:
        target = _Target.model_validate(
            {"platform": data.get("platform"), "chat_id": chat, "thread_id": thread or None, "tenant_id": tenant}
        )
    except ValidationError:
        return None
    return ReplyTarget(
        platform=target.platform, chat_id=target.chat_id, thread_id=target.thread_id, tenant_id=target.tenant_id
    )


def parse(raw: bytes, max_text_chars: int | None = None) -> InboundMessage | DeadLetterDecision:
    msg = decode_record(raw, InboundMessageAdapter, "InboundMessage")
    if isinstance(msg, Undecodable):
        return DeadLetterDecision(msg.reason, reply_target_of(raw))
    if max_text_chars is not None and len(msg.text) > max_text_chars:
        # A huge text would be a huge prompt: refuse it here, visibly, instead of in the model call.
        target = ReplyTarget(
            platform=msg.platform, chat_id=msg.chat_id, thread_id=msg.thread_id, tenant_id=msg.user.tenant_id
        )
        return DeadLetterDecision(f"text: longer than {max_text_chars} characters ({len(msg.text)})", target)
    return msg
