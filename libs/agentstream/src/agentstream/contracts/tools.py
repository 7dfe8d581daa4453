"""`tool-calls` and `tool-results` topics. Key: conversation key."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, TypeAdapter

from agentstream.contracts.base import Record
from agentstream.contracts.limits import ConversationKey, JsonText, Name, RunId


class ToolCallRefusal(StrEnum):
    """Why a tool call was answered without running (docs/tools.md § Which calls run)."""

    NOT_OFFERED = "not_offered"  # the tool is not in the run's assistant's `tools`
    NOT_APPROVED = "not_approved"  # the tool requires approval and the call carries none
    UNSIGNED = "unsigned"  # no `signature`: not published by a runner
    BAD_SIGNATURE = "bad_signature"  # a signature that does not match the call (forged or altered)


class ToolCallRequest(Record):
    """Ask the tool-executor to run one tool call."""

    type: Literal["tool.call_request"] = "tool.call_request"
    run_id: RunId
    root_run_id: RunId
    conversation_key: ConversationKey
    call_id: Name
    tool: Name
    arguments: JsonText = Field(
        description="Raw JSON arguments exactly as the model produced them (nested at most 64 deep)."
    )
    attempt: int = 1
    deadline: datetime | None = Field(default=None, description="After this the result is useless.")
    call_seq: int | None = Field(
        default=None, ge=0, description="`seq` of the run's `tool.call` event, which the call's heartbeats repeat."
    )

    offered: list[Name] | None = Field(
        default=None,
        max_length=1024,
        description="The run's assistant's `tools` list (names and `<source>__*`): the only tools this call may name.",
    )
    approval_id: Name | None = Field(
        default=None, description="The approval a person gave this call (`approval_id` of its `ApprovalRequest`)."
    )
    signature: str | None = Field(
        default=None,
        max_length=128,
        description="`v1:` + HMAC-SHA256 hex, by the runner, over the call's identity, tool, arguments, "
        "deadline, `offered` and `approval_id` (docs/tools.md § Which calls run).",
    )

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.call_id}"


class ToolCallResult(Record):
    """The outcome of one tool call."""

    type: Literal["tool.call_result"] = "tool.call_result"
    run_id: RunId
    root_run_id: RunId
    conversation_key: ConversationKey
    call_id: Name
    tool: Name
    ok: bool
    content: str = Field(default="", description="ok: what the tool returned, as the model reads it.")
    error: str | None = Field(default=None, description="Not ok: why the call failed, as the model reads it.")
    retryable: bool = Field(default=False, description="True when the model can fix the call (bad arguments).")
    duration_ms: float = Field(default=0.0, description="The whole call: lookup, arguments and the tool's run.")
    data: dict[str, Any] = Field(
        default_factory=dict,
        description="Details the model is not shown: `argument_repairs`, what the executor fixed in the arguments.",
    )
    refused: ToolCallRefusal | None = Field(
        default=None, description="Set when the call was answered without running: why (runner or executor)."
    )


ToolCallRequestAdapter: TypeAdapter[ToolCallRequest] = TypeAdapter(ToolCallRequest)
ToolCallResultAdapter: TypeAdapter[ToolCallResult] = TypeAdapter(ToolCallResult)
