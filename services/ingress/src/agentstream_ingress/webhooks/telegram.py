"""Telegram Bot API webhooks: secret-token check and Update → InboundMessage.

Message ids are only unique inside a chat on Telegram, so the idempotency key is
`<chat id>:<message id>`: a re-posted update dedupes, two chats never collide.
"""

from __future__ import annotations

import hmac
from typing import Any

from pydantic import ValidationError

from agentstream.contracts import InboundMessage, KnownPlatform, User
from agentstream.contracts.inbound import webhook_source
from agentstream_ingress.webhooks import InvalidUpdate, optional_id, scalar_id

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")


def secret_ok(expected: str | None, given: str | None) -> bool:
    """Constant-time check; an unset secret refuses everything rather than allowing it."""
    if not expected or given is None:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def to_inbound(update: dict[str, Any], bot: str) -> InboundMessage | None:
    """The message in `update`, or None for updates that are not one (or are from a bot).

    Raises `InvalidUpdate` for a message whose ids are not strings or integers."""
    message = next((update[k] for k in MESSAGE_KINDS if isinstance(update.get(k), dict)), None)
    if message is None:
        return None
    sender, chat = message.get("from") or {}, message.get("chat") or {}
    if not isinstance(sender, dict) or not isinstance(chat, dict) or sender.get("is_bot"):
        return None
    text = message.get("text") if isinstance(message.get("text"), str) else message.get("caption")
    if not isinstance(text, str) or sender.get("id") is None or chat.get("id") is None:
        return None
    chat_id, user_id = scalar_id(chat["id"], "chat.id"), scalar_id(sender["id"], "from.id")
    message_id = scalar_id(message.get("message_id"), "message_id")
    reply = message.get("reply_to_message") if isinstance(message.get("reply_to_message"), dict) else {}
    names = [p for p in (sender.get("first_name"), sender.get("last_name")) if isinstance(p, str) and p]
    username = sender.get("username")
    name = " ".join(names) or (username if isinstance(username, str) else None)
    chat_type = "direct" if chat.get("type") == "private" else chat.get("type")
    try:
        return InboundMessage(
            id=f"{chat_id}:{message_id}",
            platform=KnownPlatform.TELEGRAM,
            chat_id=chat_id,
            thread_id=optional_id(message.get("message_thread_id"), "message_thread_id"),
            user=User(id=user_id, name=name),
            text=text,
            reply_to_id=optional_id(reply.get("message_id"), "reply_to_message.message_id"),
            metadata={"bot": bot, "chat_type": chat_type, "update_id": update.get("update_id")},
            source=webhook_source(KnownPlatform.TELEGRAM, bot),
        )
    except ValidationError as err:
        raise InvalidUpdate("the message does not fit the InboundMessage contract") from err
