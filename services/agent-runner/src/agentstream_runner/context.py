"""What a run needs from the outside world, as plain objects.

The pipeline never touches Kafka: it gets `RunPorts` (publish an event, call a
tool) so unit tests pass a fake and the service passes its broker-backed ports.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentstream.config import RunnerSettings
from agentstream.contracts import AnyRunEvent, FinishReason, RunStarted, ToolCallRequest, ToolCallResult
from agentstream.tracing import NO_TRACING, Tracing
from agentstream_runner.approvals import ApprovalWaiters
from agentstream_runner.assistants import Assistants
from agentstream_runner.connectors.resolve import Connectors, RoleOverrides
from agentstream_runner.history import HistoryStore
from agentstream_runner.tool_catalog import ToolCatalog


class RunPorts(Protocol):
    async def publish_event(self, event: AnyRunEvent) -> asyncio.Future[Any] | None:
        """Hand the event to `events`, keyed by its conversation key, in call order.

        Returns the future of the broker's ack, or None when the event is already stored.
        """
        ...

    async def call_tool(self, request: ToolCallRequest) -> ToolCallResult:
        """Publish the request to `tool-calls` and wait for its result.

        Waits without limit: the caller bounds the wait (and cancels it).
        """
        ...


class RoleStore(Protocol):
    async def overrides(self, user_id: str | None, team_id: str | None) -> RoleOverrides:
        """The `role_settings` rows of this user and team."""
        ...


@dataclass
class RunControl:
    """Written by the conversation owner before it cancels the run's task, read by
    the pipeline to tell why it was cancelled; `not_started` written by the launcher for
    the owner: the StartRun was read again and its run continues from its checkpoint instead;
    `started` written by the pipeline for the service."""

    stop_reason: FinishReason | None = None
    not_started: bool = False
    # The run's `run.started` once published: published again when a restarted embedded broker lost
    # it while the run went on here (docs/decisions.md "Broker loss").
    started: RunStarted | None = None


@dataclass(frozen=True)
class RunContext:
    """What a run gets from outside: the service's collaborators, the same for every run, and the
    run's own `control`, `history` and `roles` (the launcher gives each run its copy)."""

    ports: RunPorts
    connectors: Connectors
    assistants: Assistants
    runner: RunnerSettings
    control: RunControl = field(default_factory=RunControl)
    history: HistoryStore | None = None  # None: no database, runs without history
    roles: RoleStore | None = None  # None: only the config's system roles
    tools: ToolCatalog = field(default_factory=ToolCatalog)  # empty: built-ins only
    approvals: ApprovalWaiters = field(default_factory=ApprovalWaiters)
    epoch: int = 0
    clock: Callable[[], float] = time.monotonic
    tracing: Tracing = NO_TRACING  # spans for the run, its model calls and its tool calls
