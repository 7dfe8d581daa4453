"""Start (docs/ingress.md): the run for an accepted message — StartRun for `runs`, run.queued for `events`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentstream.config import Settings
from agentstream.contracts import DoubleTexting, InboundMessage, RunOptions, RunQueued, StartRun, new_id
from agentstream_ingress.decisions import StartDecision, target_of
from agentstream_ingress.routing import Routed

CONNECTOR_ROLE_PREFIX = "use::"


def run_options(routed: Routed, role_override: str | None, double_texting: DoubleTexting | None = None) -> RunOptions:
    """What the profile (and a `/model` override or `/queue`) asks of the runner and delivery."""
    profile = routed.profile
    given: dict[str, Any] = {}
    role = role_override or profile.connector_role
    if role:
        given["connector"] = f"{CONNECTOR_ROLE_PREFIX}{role}"
    policy = double_texting or profile.double_texting
    if policy:
        given["double_texting"] = policy
    if profile.delivery:
        given["delivery"] = dict(profile.delivery)
    return RunOptions.model_validate(given)


def build_start(
    msg: InboundMessage,
    routed: Routed,
    role_override: str | None,
    settings: Settings,
    double_texting: DoubleTexting | None = None,
) -> StartDecision:
    key, run_id, target, now = msg.conversation_key, new_id(), target_of(msg), datetime.now(UTC)
    assistant = msg.assistant_id or routed.profile.assistant or settings.default_assistant
    start = StartRun(
        id=new_id(),
        ts=now,
        run_id=run_id,
        conversation_key=key,
        assistant_id=assistant,
        user=msg.user,
        text=msg.text,
        inbound_id=msg.id,
        reply_target=target,
        metadata={**msg.metadata, "profile": routed.name},
        options=run_options(routed, role_override, double_texting),
    )
    queued = RunQueued(
        id=new_id(),
        ts=now,
        run_id=run_id,
        root_run_id=run_id,
        conversation_key=key,
        seq=0,
        assistant_id=assistant,
        inbound_id=msg.id,
        reply_target=target,
        text=msg.text,
        user_id=msg.user.id,
        tenant_id=msg.user.tenant_id,
    )
    return StartDecision(message=msg, start=start, queued=queued)
