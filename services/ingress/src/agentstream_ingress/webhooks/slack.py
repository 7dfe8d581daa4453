"""Slack Events API: request signing (v0) and event → InboundMessage.

Signature: `v0=` + HMAC-SHA256(signing secret, `v0:<timestamp>:<raw body>`); requests
whose timestamp is more than `max_age_s` away from now are refused (replay protection).
The idempotency key is `<channel>:<ts>`: Slack retries carry the same ts.
"""

from __future__ import annotations

import hashlib
import hmac
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from agentstream.contracts import InboundMessage, KnownPlatform, User
from agentstream.contracts.inbound import webhook_source
from agentstream_ingress.webhooks import InvalidUpdate, optional_id, scalar_id

SIGNATURE_HEADER = "X-Slack-Signature"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
MESSAGE_EVENTS = ("message", "app_mention")
MAX_TIMESTAMP_DIGITS = 12  # Unix seconds have 10 digits until the year 2286


class SignatureCheck(StrEnum):
    OK = "ok"
    MISSING = "missing"
    STALE = "stale"
    BAD = "bad"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def check_signature(
    secret: str | None, timestamp: str | None, signature: str | None, body: bytes, now: float, max_age_s: float
) -> SignatureCheck:
    if not secret or not timestamp or not signature:
        return SignatureCheck.MISSING
    # Unix seconds as plain digits: `int()` would also take signs, spaces and `1_000`, and
    # a 400-digit number overflows the float arithmetic below.
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > MAX_TIMESTAMP_DIGITS:
        return SignatureCheck.BAD
    if abs(now - int(timestamp)) > max_age_s:
        return SignatureCheck.STALE
    if not hmac.compare_digest(sign(secret, timestamp, body).encode(), signature.encode()):
        return SignatureCheck.BAD
    return SignatureCheck.OK


def is_bot_event(event: dict[str, Any]) -> bool:
    return bool(event.get("bot_id")) or event.get("subtype") in ("bot_message", "message_changed", "message_deleted")


def to_inbound(payload: dict[str, Any]) -> InboundMessage | None:
    """The user message in an `event_callback`, or None (other events, bot-authored messages).

    Raises `InvalidUpdate` for a message whose ids are not strings or integers."""
    event = payload.get("event")
    if payload.get("type") != "event_callback" or not isinstance(event, dict):
        return None
    if event.get("type") not in MESSAGE_EVENTS or is_bot_event(event):
        return None
    channel, ts, user, text = event.get("channel"), event.get("ts"), event.get("user"), event.get("text")
    if channel is None or ts is None or user is None or not isinstance(text, str):
        return None
    channel, ts, user = scalar_id(channel, "event.channel"), scalar_id(ts, "event.ts"), scalar_id(user, "event.user")
    team = optional_id(event.get("team") or payload.get("team_id"), "team")
    thread = optional_id(event.get("thread_ts"), "event.thread_ts")
    try:
        return InboundMessage(
            id=f"{channel}:{ts}",
            platform=KnownPlatform.SLACK,
            chat_id=channel,
            thread_id=thread if thread != ts else None,
            user=User(id=user, team_id=team),
            text=text,
            metadata={
                "chat_type": "direct" if event.get("channel_type") == "im" else event.get("channel_type"),
                "event_id": payload.get("event_id"),
            },
            source=webhook_source(KnownPlatform.SLACK),
        )
    except ValidationError as err:
        raise InvalidUpdate("the event does not fit the InboundMessage contract") from err
