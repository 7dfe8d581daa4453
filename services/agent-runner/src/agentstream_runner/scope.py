"""One run in progress (root or delegated child) and what its root shares.

`RunScope` is what the pipeline's steps read and update: the assistant and its
hooks, the connector (and so the capabilities), the memory sent to the model,
sampling options and tool names. `RootTotals` is shared by a root run and all of
its children: the usage of every LLM call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentstream.contracts import (
    ApprovalRequest,
    ChatMessage,
    MessageRole,
    StartRun,
    ToolCallRefusal,
    ToolCallResult,
    ToolCallSpec,
    Usage,
)
from agentstream.tools_catalog import ToolSpec
from agentstream_runner.assistants import Assistant
from agentstream_runner.connectors.base import Connector
from agentstream_runner.connectors.resolve import RoleOverrides
from agentstream_runner.context import RunContext
from agentstream_runner.emitter import RunEmitter
from agentstream_runner.hooks import Hooks

MAX_DEPTH = 5
MAX_TOOL_ATTEMPTS = 3


@dataclass
class RootTotals:
    usage: Usage = field(default_factory=Usage)

    def add(self, usage: Usage) -> None:
        self.usage = self.usage + usage


@dataclass(frozen=True)
class Answer:
    """How a run (or child run) ended well: its answer text and hook data."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunScope:
    ctx: RunContext
    start: StartRun
    events: RunEmitter
    totals: RootTotals
    assistant: Assistant
    hooks: Hooks
    connector: Connector
    overrides: RoleOverrides
    memory: list[ChatMessage]
    options: dict[str, Any]
    metadata: dict[str, Any]
    tool_names: list[str]
    chain: tuple[str, ...]  # assistant ids from the root down to this run: cycle detection
    # A resumed run that paused for approval: the request its first tool round waits for again.
    resumed_approval: ApprovalRequest | None = None

    @property
    def run_id(self) -> str:
        return self.events.run_id

    def conversation(self) -> list[ChatMessage]:
        """The memory without system prompts: what a child or fallback assistant answers."""
        return [m for m in self.memory if m.role != MessageRole.SYSTEM]

    def step_id(self, kind: str) -> str:
        """Unique within the root run, children and resumed attempts included: the seq
        its `step.started` gets (seqs only increase, also across a resume)."""
        return f"{kind}-{self.events.next_seq}"

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the model is offered: the selected tools some executor serves now (built-ins always);
        nothing when the connector cannot call tools."""
        if "tools" not in self.connector.capabilities:
            return ()
        return self.ctx.tools.offered(self.tool_names)

    def failed_call(
        self, call: ToolCallSpec, error: str, *, retryable: bool, refused: ToolCallRefusal | None = None
    ) -> ToolCallResult:
        """The result of a call the runner answers itself, without an executor (refused, denied, expired)."""
        return ToolCallResult(
            run_id=self.run_id,
            root_run_id=self.events.root_run_id,
            conversation_key=self.start.conversation_key,
            call_id=call.id,
            tool=call.name,
            ok=False,
            error=error,
            retryable=retryable,
            refused=refused,
        )
