"""Lifecycle events of delivery's hooks: the points and what each one's `data` holds (docs/hooks.md).

A `HookEvent` is what every observer hook receives and the JSON body the `webhook` hook POSTs, so
its shape is a public contract like a topic record's. Delivery maps topic records to it
(`agentstream_delivery.hooks.events`); the built-in hooks read its `data` through these models.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from agentstream.contracts.base import Value
from agentstream.contracts.common import ReplyTarget, Usage
from agentstream.contracts.endings import FinishReason, RunStatus
from agentstream.contracts.events import NoticeLevel, StepType


class HookPoint(StrEnum):
    """The lifecycle points (`command:<name>` is one per command: `command_point`)."""

    AGENT_START = "agent:start"
    AGENT_STEP = "agent:step"
    AGENT_END = "agent:end"
    DELIVERY_SENT = "delivery:sent"
    SESSION_START = "session:start"
    SESSION_END = "session:end"
    SESSION_RESET = "session:reset"
    COMMAND = "command:*"  # a pattern: the events say `command:new`, `command:stop`, …


def command_point(name: str) -> str:
    """The point of command `name` (`command:new`); `HookPoint.COMMAND` matches every one."""
    return f"command:{name}"


class AgentStartData(Value):
    """`agent:start`: who runs what, where the answer goes."""

    assistant_id: str
    connector_id: str | None
    user_id: str | None
    tenant_id: str | None
    session_id: str | None
    reply_target: ReplyTarget


class AgentStepData(Value):
    """`agent:step` of a completed step."""

    step_id: str
    step_type: StepType
    ok: bool
    depth: int


class AgentStepFailedData(AgentStepData):
    """`agent:step` of a failed step: as a completed one, with its `error`."""

    error: str


class AgentEndData(Value):
    """`agent:end`: how the root run ended and what it used."""

    status: RunStatus
    error: str | None
    reason: FinishReason | None
    usage: Usage
    duration_ms: float


class DeliverySentData(Value):
    """`delivery:sent`: a platform message the platform accepted."""

    platform: str
    chat_id: str
    segment: int
    platform_message_id: str | None
    text_length: int
    final: bool


class SessionData(Value):
    """`session:start`, `session:end`, `session:reset` (the session that ended, if known)."""

    session_id: str | None


class CommandData(Value):
    """`command:<name>`: the command and the notice that answered it."""

    command: str
    text: str
    level: NoticeLevel


# Most specific first: a failed step's data is also a step's.
HookData = (
    AgentStartData | AgentStepFailedData | AgentStepData | AgentEndData | DeliverySentData | CommandData | SessionData
)


class HookEvent(Value):
    """One lifecycle event, as observers (and the webhook's JSON body) see it."""

    point: str = Field(description="A `HookPoint`, or `command:<name>`.")
    event_id: str = Field(description="Id of the topic record it came from (with `point`: unique).")
    conversation_key: str
    root_run_id: str | None = None
    run_id: str | None = None
    ts: datetime
    data: HookData
