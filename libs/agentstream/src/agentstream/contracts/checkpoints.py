"""What a run that did not complete leaves for its resume: the `start` of its checkpoint.

persistence writes it (the `start` column of `run_checkpoints`, JSON) from the run's `run.queued`
and `run.started`; the runner reads it back to rebuild the `StartRun` (docs/persistence.md). Every
field has a default: a checkpoint written before a field existed still reads.
"""

from __future__ import annotations

from pydantic import Field

from agentstream.contracts.base import Value
from agentstream.contracts.common import ChatMessage, ReplyTarget


class CheckpointStart(Value):
    """What a resume needs to run as the same user, for the same target, in the same session."""

    assistant_id: str | None = None
    connector_id: str | None = None
    user_id: str | None = None
    tenant_id: str | None = None  # missing in older checkpoints: the conversation key has it
    session_id: str | None = None
    reply_target: ReplyTarget | None = None  # missing when the run left neither `run.queued` nor `run.started`
    input: list[ChatMessage] = Field(default_factory=list, description="The run's input as it first saw it.")
    text: str = Field(default="", description="The queued message's text (when the run never started).")
