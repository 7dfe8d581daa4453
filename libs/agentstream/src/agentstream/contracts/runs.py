"""`runs` topic: commands for the agent-runner. Key: conversation key."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from agentstream.contracts.base import Record
from agentstream.contracts.common import ReplyTarget
from agentstream.contracts.endings import FinishReason
from agentstream.contracts.inbound import User
from agentstream.contracts.limits import ConversationKey, Name, RunId, SessionId, Subject


class StartRun(Record):
    """Start a root run for one user message."""

    type: Literal["run.start"] = "run.start"
    run_id: RunId
    conversation_key: ConversationKey
    session_id: SessionId | None = Field(
        default=None, description="History session; None = the conversation's current."
    )
    assistant_id: Name
    user: User | None = Field(default=None, description="The identity; None is refused by permission.")
    text: str
    inbound_id: Subject | None = Field(default=None, description="The InboundMessage id that caused this run.")
    reply_target: ReplyTarget
    options: dict[str, Any] = Field(default_factory=dict, description="Per-request options (win over the assistant's).")
    metadata: dict[str, Any] = Field(default_factory=dict)


class InterruptRun(Record):
    """Stop the conversation's current run (or a given run)."""

    type: Literal["run.interrupt"] = "run.interrupt"
    conversation_key: ConversationKey
    run_id: RunId | None = None
    reason: FinishReason = FinishReason.USER


class ResumeRun(Record):
    """Resume a failed or interrupted run from its checkpoint."""

    type: Literal["run.resume"] = "run.resume"
    conversation_key: ConversationKey
    run_id: RunId


class ResetConversation(Record):
    """Start a new session: empty history, current run stopped."""

    type: Literal["conversation.reset"] = "conversation.reset"
    conversation_key: ConversationKey


RunCommand = Annotated[StartRun | InterruptRun | ResumeRun | ResetConversation, Field(discriminator="type")]
RunCommandAdapter: TypeAdapter[RunCommand] = TypeAdapter(RunCommand)
