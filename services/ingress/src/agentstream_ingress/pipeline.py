"""The ordered decisions for one inbound record, as a pure function.

parse → (later: dedupe, self-echo, authz, rate limit, hooks, commands, routing) → start.
Each step returns a `Decision`; the app only carries decisions out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from agentstream.config import Settings
from agentstream.contracts import (
    InboundMessage,
    ReplyTarget,
    RunQueued,
    StartRun,
    new_id,
)
from agentstream.service import describe_validation_error


@dataclass(frozen=True)
class DeadLetterDecision:
    """Unusable record: to `dlq`; `notify` is where the user can be told, if known."""

    error: str
    notify: ReplyTarget | None


@dataclass(frozen=True)
class StartDecision:
    message: InboundMessage
    start: StartRun
    queued: RunQueued


Decision = DeadLetterDecision | StartDecision


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


def parse(raw: bytes) -> InboundMessage | DeadLetterDecision:
    try:
        return InboundMessage.model_validate_json(raw)
    except ValidationError as err:
        if any(e["type"] == "json_invalid" for e in err.errors()):
            return DeadLetterDecision("not valid JSON: " + describe_validation_error(err), None)
        return DeadLetterDecision(
            "invalid InboundMessage: " + describe_validation_error(err), reply_target_of(raw)
        )


def decide(raw: bytes, settings: Settings) -> Decision:
    parsed = parse(raw)
    if isinstance(parsed, DeadLetterDecision):
        return parsed
    msg = parsed
    key = msg.conversation_key
    run_id = new_id()
    assistant = msg.assistant_id or settings.default_assistant
    target = ReplyTarget(
        platform=msg.platform, chat_id=msg.chat_id, thread_id=msg.thread_id, reply_to_id=msg.reply_to_id
    )
    start = StartRun(
        run_id=run_id, conversation_key=key, assistant_id=assistant, user=msg.user, text=msg.text,
        inbound_id=msg.id, reply_target=target, metadata=msg.metadata,
    )
    queued = RunQueued(
        run_id=run_id, root_run_id=run_id, conversation_key=key, seq=0, assistant_id=assistant, inbound_id=msg.id,
        reply_target=target, text=msg.text, user_id=msg.user.id,
    )
    return StartDecision(message=msg, start=start, queued=queued)
