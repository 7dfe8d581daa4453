"""Telegram Bot API webhooks: secret-token check and Update → InboundMessage.

Message ids are only unique inside a chat on Telegram, so the idempotency key is
`<chat id>:<message id>`: a re-posted update dedupes, two chats never collide.
"""

from __future__ import annotations

import hmac
from typing import Any

from pydantic import ValidationError

from agentstream.contracts import InboundMessage, User

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")


def secret_ok(expected: str | None, given: str | None) -> bool:
    """Constant-time check; an unset secret refuses everything rather than allowing it."""
    if not expected or given is None:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def to_inbound(update: dict[str, Any], bot: str) -> InboundMessage | None:
    """The message in `update`, or None for updates that are not one (or are from a bot)."""
    message = next((update[k] for k in MESSAGE_KINDS if isinstance(update.get(k), dict)), None)
    if message is None:
        return None
    sender, chat = message.get("from") or {}, message.get("chat") or {}
    if not isinstance(sender, dict) or not isinstance(chat, dict) or sender.get("is_bot"):
        return None
    text = message.get("text") if isinstance(message.get("text"), str) else message.get("caption")
    if not isinstance(text, str) or sender.get("id") is None or chat.get("id") is None:
        return None
    reply = message.get("reply_to_message") if isinstance(message.get("reply_to_message"), dict) else {}
    name = " ".join(str(p) for p in (sender.get("first_name"), sender.get("last_name")) if p) or sender.get("username")
    chat_type = "direct" if chat.get("type") == "private" else chat.get("type")
    thread = message.get("message_thread_id")
    try:
        return InboundMessage(
            id=f"{chat['id']}:{message.get('message_id')}", platform="telegram", chat_id=str(chat["id"]),
            thread_id=str(thread) if thread is not None else None,
            user=User(id=str(sender["id"]), name=name), text=text,
            reply_to_id=str(reply["message_id"]) if reply.get("message_id") is not None else None,
            metadata={"bot": bot, "chat_type": chat_type, "update_id": update.get("update_id")},
        )
    except ValidationError:
        return None
