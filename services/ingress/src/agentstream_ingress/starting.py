"""Step 9: the run for an accepted message — StartRun for `runs`, run.queued for `events`."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from agentstream.config import Settings
from agentstream.contracts import InboundMessage, RunQueued, StartRun
from agentstream_ingress.decisions import StartDecision, target_of
from agentstream_ingress.routing import Routed

CONNECTOR_ROLE_PREFIX = "use::"
# The variant nibble of an RFC 4122 UUID: 10xx in binary.
_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def fresh_id() -> str:
    """A random (version 4) UUID string, like `new_id`, without building a `uuid.UUID`
    object (that took two thirds of the time, and a run needs three ids)."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def run_options(routed: Routed, role_override: str | None) -> dict[str, Any]:
    """What the profile (and a `/model` override) asks of the runner and delivery."""
    profile = routed.profile
    options: dict[str, Any] = {}
    role = role_override or profile.connector_role
    if role:
        options["connector"] = f"{CONNECTOR_ROLE_PREFIX}{role}"
    if profile.double_texting:
        options["double_texting"] = profile.double_texting
    if profile.delivery:
        options["delivery"] = dict(profile.delivery)
    return options


def build_start(msg: InboundMessage, routed: Routed, role_override: str | None, settings: Settings,
                **extra_options: Any) -> StartDecision:
    key, run_id, target, now = msg.conversation_key, fresh_id(), target_of(msg), datetime.now(UTC)
    assistant = msg.assistant_id or routed.profile.assistant or settings.default_assistant
    start = StartRun(
        id=fresh_id(), ts=now, run_id=run_id, conversation_key=key, assistant_id=assistant, user=msg.user,
        text=msg.text, inbound_id=msg.id, reply_target=target, metadata={**msg.metadata, "profile": routed.name},
        options={**run_options(routed, role_override), **extra_options},
    )
    queued = RunQueued(
        id=fresh_id(), ts=now, run_id=run_id, root_run_id=run_id, conversation_key=key, seq=0,
        assistant_id=assistant, inbound_id=msg.id, reply_target=target, text=msg.text, user_id=msg.user.id,
    )
    return StartDecision(message=msg, start=start, queued=queued)
