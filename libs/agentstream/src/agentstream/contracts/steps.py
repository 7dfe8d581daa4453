"""What a checkpointed step's `input` and `output` hold, per `StepType` (the `step.*` events).

On the wire `input` and `output` stay JSON objects whose shape the record's `step_type` says
(docs/topics.md), so a consumer that does not care reads them as such. The runner builds them
from these models and every reader decodes them with the same models (`LlmStepOutput` for a
lost run's usage and the token metrics, `ApprovalRequest` for an `approval` step's output), so
the two ends cannot drift apart. Readers' fields have defaults: an older record still decodes.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentstream.contracts.base import Value
from agentstream.contracts.common import ToolCallSpec, Usage


class StepValue(Value):
    def as_json(self) -> dict[str, Any]:
        """The JSON object the `step.*` event carries."""
        return self.model_dump(mode="json")


class HookCreateStepInput(StepValue):
    """`hook_create`: the assistant whose Create hook runs, over how many messages."""

    assistant: str
    messages: int


class LlmStepInput(StepValue):
    """`llm`: the connector called, how many messages it is sent and the tools it is offered."""

    connector: str
    messages: int
    tools: list[str] = Field(default_factory=list)


class LlmStepOutput(StepValue):
    """`llm`: the completion (its text, its tool calls) and its usage."""

    text: str = ""
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


class ToolStepInput(StepValue):
    """`tool`: one round of calls, and which attempt of the round it is."""

    attempt: int
    calls: list[ToolCallSpec]


class ToolStepResult(StepValue):
    call_id: str
    tool: str
    ok: bool
    content: str = ""
    error: str | None = None


class ToolStepOutput(StepValue):
    """`tool`: each call's result, as the model reads it."""

    results: list[ToolStepResult] = Field(default_factory=list)


class ApprovalStepInput(StepValue):
    """`approval`: the calls waiting for a person (the output is the `ApprovalRequest`)."""

    calls: list[str]


class DelegateStepInput(StepValue):
    """`delegate`: the child run, its assistant and how many messages it is given."""

    assistant: str
    child_run_id: str
    messages: int


class DelegateStepOutput(StepValue):
    """`delegate`: the child's answer and the data its hooks attached."""

    text: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
