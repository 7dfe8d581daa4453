"""The runner's `RunPorts` over Kafka: events to `events`, tool calls to `tool-calls`.

Built by `bootstrap` over the service's publisher, so runs publish through it directly and
nothing of a run goes back through the service. Tool calls in flight wait in
`ToolWaiters`: one future per (run_id, call_id), resolved by the `tool-results` handler;
unknown or late results resolve nothing. Every call leaves signed with the tool-call secret
(`agentstream.tool_call_signing`): executors refuse calls no runner signed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentstream.contracts import AnyRunEvent, ToolCallRequest, ToolCallResult
from agentstream.kafka.topics import EVENTS, TOOL_CALLS
from agentstream.publishing import Publisher
from agentstream.tool_call_signing import sign
from agentstream_runner.run_metrics import RunMetrics


class ToolWaiters:
    def __init__(self) -> None:
        self._futures: dict[tuple[str, str], asyncio.Future[ToolCallResult]] = {}

    def expect(self, run_id: str, call_id: str) -> asyncio.Future[ToolCallResult]:
        future: asyncio.Future[ToolCallResult] = asyncio.get_running_loop().create_future()
        self._futures[(run_id, call_id)] = future
        return future

    def resolve(self, result: ToolCallResult) -> bool:
        """True when a run was waiting for this result."""
        future = self._futures.pop((result.run_id, result.call_id), None)
        if future is None or future.done():
            return False
        future.set_result(result)
        return True

    def discard(self, run_id: str, call_id: str) -> None:
        future = self._futures.pop((run_id, call_id), None)
        if future is not None and not future.done():
            future.cancel()

    def __len__(self) -> int:
        return len(self._futures)


class BrokerRunPorts:
    """`RunPorts` through the service's `Publisher` (typed: only events reach `events`)."""

    def __init__(
        self, publisher: Publisher, waiters: ToolWaiters, metrics: RunMetrics, call_secret: bytes | None = None
    ) -> None:
        """`call_secret`: signs every tool call; None (only with `tools.accept_unsigned_calls`) sends them unsigned."""
        self._publisher = publisher
        self._call_secret = call_secret
        self._metrics = metrics
        self._waiters = waiters

    async def publish_event(self, event: AnyRunEvent) -> asyncio.Future[Any]:
        ack = await self._publisher.publish_nowait(EVENTS, event)
        self._metrics.observe(event)
        return ack

    async def call_tool(self, request: ToolCallRequest) -> ToolCallResult:
        if self._call_secret is not None:
            request = sign(request, self._call_secret)
        result = self._waiters.expect(request.run_id, request.call_id)  # before publishing: no lost result
        try:
            await self._publisher.publish(TOOL_CALLS, request)
            return await result
        finally:
            self._waiters.discard(request.run_id, request.call_id)
