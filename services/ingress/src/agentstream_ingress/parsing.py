"""Step 1: parse and validate one raw `inbound` record against the InboundMessage contract."""

from __future__ import annotations

import json

from pydantic import ValidationError

from agentstream.contracts import InboundMessage, ReplyTarget
from agentstream.service import describe_validation_error
from agentstream_ingress.decisions import DeadLetterDecision


def reply_target_of(raw: bytes) -> ReplyTarget | None:
    """Best effort: where to tell the user their message was bad."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    platform, chat = data.get("platform"), data.get("chat_id")
    if isinstance(platform, str) and platform and isinstance(chat, str | int) and str(chat):
        thread = data.get("thread_id")
        return ReplyTarget(platform=platform, chat_id=str(chat), thread_id=str(thread) if thread else None)
    return None


# Column widths of the ingress tables and the conversation key: longer values are refused
# here, with a reason, instead of failing later in the database.
MAX_LENGTHS = {"id": 256, "platform": 64, "chat_id": 200, "thread_id": 200}
MAX_USER_ID = 256


def too_long(msg: InboundMessage) -> str | None:
    for field, limit in MAX_LENGTHS.items():
        value = getattr(msg, field)
        if value is not None and len(value) > limit:
            return f"{field}: longer than {limit} characters"
    if len(msg.user.id) > MAX_USER_ID:
        return f"user.id: longer than {MAX_USER_ID} characters"
    return None


def parse(raw: bytes, max_text_chars: int | None = None) -> InboundMessage | DeadLetterDecision:
    try:
        msg = InboundMessage.model_validate_json(raw)
    except ValidationError as err:
        if any(e["type"] == "json_invalid" for e in err.errors()):
            return DeadLetterDecision("not valid JSON: " + describe_validation_error(err), None)
        return DeadLetterDecision("invalid InboundMessage: " + describe_validation_error(err), reply_target_of(raw))
    oversized = too_long(msg)
    if oversized is not None:
        return DeadLetterDecision(oversized, None)
    if max_text_chars is not None and len(msg.text) > max_text_chars:
        # A huge text would be a huge prompt: refuse it here, visibly, instead of in the model call.
        target = ReplyTarget(platform=msg.platform, chat_id=msg.chat_id, thread_id=msg.thread_id)
        return DeadLetterDecision(f"text: longer than {max_text_chars} characters ({len(msg.text)})", target)
    return msg
