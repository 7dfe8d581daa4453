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
    assistant = msg.assistant_id or routed.profile.assistant or settings.default_assistant
    start = StartRun(
        id=new_id(),
        ts=datetime.now(UTC),
        run_id=new_id(),
        conversation_key=msg.conversation_key,
        assistant_id=assistant,
        user=msg.user,
        text=msg.text,
        inbound_id=msg.id,
        reply_target=target_of(msg),
        metadata={**msg.metadata, "profile": routed.name},
        options=run_options(routed, role_override, double_texting),
    )
    return StartDecision(message=msg, start=start, queued=queued_for(start))


def queued_for(start: StartRun) -> RunQueued:
    """The `run.queued` event announcing `start`: the first record (seq 0) of its root run."""
    return RunQueued(
        id=new_id(),
        ts=start.ts,
        run_id=start.run_id,
        root_run_id=start.run_id,
        conversation_key=start.conversation_key,
        seq=0,
        assistant_id=start.assistant_id,
        inbound_id=start.inbound_id,
        reply_target=start.reply_target,
        text=start.text,
        user_id=start.user.id if start.user else None,
        tenant_id=start.user.tenant_id if start.user else None,
    )
