"""`events` topic: everything that happens in a run. Key: conversation key.

Every event carries its run's identity and ``seq``, strictly increasing per root
run (``run.queued`` from ingress is seq 0; the runner continues from 1). Child runs
(delegation) stream into the root's stream with their own ``run_id`` and ``depth``
and never emit ``run.started``/``run.finished`` of their own.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from agentstream.contracts.approvals import ApprovalOutcome, ApprovalRequest
from agentstream.contracts.base import Record, new_id
from agentstream.contracts.common import ChatMessage, ReplyTarget, Usage
from agentstream.contracts.endings import FinishReason, RunStatus
from agentstream.contracts.limits import ConversationKey, JsonText, Name, Reason, RunId, SessionId, Subject
from agentstream.contracts.runs import Arrival
from agentstream.contracts.tools import ToolCallRefusal


class StepType(StrEnum):
    """What a checkpointed step of a run did (`step.*` events)."""

    HOOK_CREATE = "hook_create"
    LLM = "llm"
    TOOL = "tool"
    HOOK_NEXT = "hook_next"
    DELEGATE = "delegate"
    APPROVAL = "approval"  # tool calls waiting for a person's approval (output: `ApprovalRequest`)


class DeltaKind(StrEnum):
    """What a `message.delta` carries: answer text, or the model's thinking (not part of the answer)."""

    TEXT = "text"
    THINKING = "thinking"


class NoticeLevel(StrEnum):
    """How serious a notice is. Platforms show every level alike; `agentstream run` prints errors
    in red, and hooks see it as `level`."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class EventBase(Record):
    """What every event carries: which run (and where it sits in a delegation tree), its
    conversation, its place `seq` in the root run's stream and the runner's ownership `epoch`."""

    id: RunId = Field(default_factory=new_id, description="Unique record id (uuid4).")
    run_id: RunId
    root_run_id: RunId
    parent_run_id: RunId | None = None
    depth: int = 0
    conversation_key: ConversationKey
    seq: int = Field(ge=0, description="Strictly increasing per root run.")
    epoch: int = Field(default=0, description="Runner ownership epoch (fences stale writers).")


class RunQueued(EventBase):
    """Ingress accepted a message and queued a run for it: seq 0, before any runner saw it."""

    type: Literal["run.queued"] = "run.queued"
    inbound_id: Subject | None = Field(default=None, description="The InboundMessage id that caused this run.")
    assistant_id: Name
    reply_target: ReplyTarget
    text: str = ""
    user_id: Subject | None = None
    tenant_id: Subject | None = Field(default=None, description="The user's tenant (isolation of the read API).")


class RunStarted(EventBase):
    """A root run began: its input and where its answer goes. A child run has none of its own."""

    type: Literal["run.started"] = "run.started"
    assistant_id: Name
    connector_id: Name
    reply_target: ReplyTarget
    input: list[ChatMessage] = Field(default_factory=list, description="The new input messages of this run.")
    user_id: Subject | None = None
    session_id: SessionId | None = None
    tenant_id: Subject | None = Field(default=None, description="The user's tenant (billing, isolation).")
    store_history: bool = Field(
        default=True, description="False when the request skipped history: the run is recorded, its messages are not."
    )
    replay_of: RunId | None = Field(
        default=None,
        description="Set on a replay (`agentstream replay`): the root run whose visible stream this re-projects. "
        "Delivered like any run; persistence stores nothing of it.",
    )
    arrival: Arrival | None = Field(
        default=None, description="When the run's message passed each hop up to the runner (its `StartRun`'s)."
    )


class MessageStarted(EventBase):
    """One model call began to answer (text or thinking); its deltas and its completion follow."""

    type: Literal["message.started"] = "message.started"
    message_id: Name


class MessageDelta(EventBase):
    """The next piece of a message, coalesced over `runner.coalesce_ms`; `thinking` is not part of the answer."""

    type: Literal["message.delta"] = "message.delta"
    message_id: Name
    text: str
    kind: DeltaKind = DeltaKind.TEXT


class MessageCompleted(EventBase):
    """A message is complete: `text` is all of its answer text."""

    type: Literal["message.completed"] = "message.completed"
    message_id: Name
    text: str


class ToolCall(EventBase):
    """The model called a tool; `attempt` counts the times this call was asked."""

    type: Literal["tool.call"] = "tool.call"
    call_id: Name
    tool: Name
    arguments: JsonText = Field(description="Raw JSON arguments (nested at most 64 deep).")
    attempt: int = 1


class ToolResult(EventBase):
    """What a tool call returned (`ok`), or why it failed (`error`)."""

    type: Literal["tool.result"] = "tool.result"
    call_id: Name
    tool: Name
    ok: bool
    content: str = ""
    error: str | None = None
    retryable: bool = False
    duration_ms: float = 0.0
    refused: ToolCallRefusal | None = Field(default=None, description="Answered without running: why.")


class SegmentBreak(EventBase):
    """Delivery seals the current platform message: what follows goes into a new one."""

    type: Literal["segment.break"] = "segment.break"
    reason: Reason = "tool"


class StepStarted(EventBase):
    """A checkpointed step of the run began (`step_type` says what it does)."""

    type: Literal["step.started"] = "step.started"
    step_id: Name
    step_type: StepType
    input: dict[str, Any] = Field(default_factory=dict)


class StepCompleted(EventBase):
    """A checkpointed step ended; `memory` is the conversation after it, where a resumed run starts."""

    type: Literal["step.completed"] = "step.completed"
    step_id: Name
    step_type: StepType
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    memory: list[ChatMessage] = Field(default_factory=list, description="Snapshot for resume.")


class StepFailed(EventBase):
    """A checkpointed step failed with `error`."""

    type: Literal["step.failed"] = "step.failed"
    step_id: Name
    step_type: StepType
    input: dict[str, Any] = Field(default_factory=dict)
    error: str


class RunHeartbeat(EventBase):
    """The run is alive (every `runner.heartbeat_s`): a slow run is not taken for a lost one."""

    type: Literal["run.heartbeat"] = "run.heartbeat"


class ToolHeartbeat(EventBase):
    """The tool-executor is still running a call (sent every `tools.heartbeat_interval_s`).

    The executor does not own the run's sequence: a tool heartbeat repeats the `seq` of the
    call's `tool.call` event (0 when the request did not say it) and never advances it.
    """

    type: Literal["tool.heartbeat"] = "tool.heartbeat"
    call_id: Name
    tool: Name
    elapsed_ms: float = Field(default=0.0, ge=0, description="How long the call has been running.")


class Notice(EventBase):
    """A message for the user that is not model output (command replies, errors)."""

    type: Literal["notice"] = "notice"
    level: NoticeLevel = NoticeLevel.INFO
    text: str
    reply_target: ReplyTarget | None = None
    command: str | None = Field(default=None, description="The slash command this notice answers (`new`, `stop`, …).")
    approval: ApprovalRequest | None = Field(
        default=None, description="Set when the run paused at tool calls awaiting `/approve` or `/deny`."
    )
    approval_outcome: ApprovalOutcome | None = Field(
        default=None, description="Set when a pending approval ended (approved, denied, expired)."
    )


class RunFinished(EventBase):
    """A root run ended: how (`status`, `reason`), its answer and what it used. A child run has none of its own."""

    type: Literal["run.finished"] = "run.finished"
    status: RunStatus
    error: str | None = None
    reason: FinishReason | None = Field(default=None, description="Why it ended so; None when it simply answered.")
    text: str = Field(default="", description="The final answer text of the root run.")
    usage: Usage = Field(default_factory=Usage)
    duration_ms: float = 0.0
    data: dict[str, Any] = Field(default_factory=dict, description="Data a `next` hook attached to the result.")

    @classmethod
    def runner_lost(
        cls,
        *,
        root_run_id: str,
        conversation_key: str,
        seq: int,
        epoch: int,
        error: str,
        text: str,
        usage: Usage,
        duration_ms: float,
    ) -> RunFinished:
        """The ending of a run whose runner is gone: written by whoever notices it first
        (persistence's watchdog, or the runner that takes over its conversations)."""
        return cls(
            run_id=root_run_id,
            root_run_id=root_run_id,
            conversation_key=conversation_key,
            seq=seq,
            epoch=epoch,
            status=RunStatus.FAILED,
            reason=FinishReason.RUNNER_LOST,
            error=error,
            text=text,
            usage=usage,
            duration_ms=max(0.0, duration_ms),
        )


# The events between a run's start and its finish: what it says, calls and does, and that it is alive.
RunProgressEvent = (
    MessageStarted
    | MessageDelta
    | MessageCompleted
    | ToolCall
    | ToolResult
    | SegmentBreak
    | StepStarted
    | StepCompleted
    | StepFailed
    | RunHeartbeat
    | ToolHeartbeat
)
# The plain union, for type checking: a `match` over it ending in `typing.assert_never`
# makes mypy name every consumer that misses a new event type.
AnyRunEvent = RunQueued | RunStarted | RunProgressEvent | Notice | RunFinished
RunEvent = Annotated[AnyRunEvent, Field(discriminator="type")]
RunEventAdapter: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
