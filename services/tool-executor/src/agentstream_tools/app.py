"""tool-executor service: runs each `tool-calls` record and publishes its result.

Each call runs in its own task, so a slow tool never blocks the partition; a
semaphore bounds how many tools run at once. The result goes to `tool-results`
keyed by the request's conversation key (co-partitioned with the runner's `runs`).
"""

from __future__ import annotations

import asyncio

from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter, Histogram
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream.contracts.tools import ToolCallRequestAdapter
from agentstream.service import Service, describe_validation_error
from agentstream_tools.builtin import builtin_tools
from agentstream_tools.executor import execute
from agentstream_tools.registry import ToolRegistry


class ExecutorOptions(BaseModel):
    """The keys of the `tools` config section this service reads."""

    model_config = ConfigDict(extra="ignore")

    max_concurrency: int = Field(default=16, ge=1, description="Tool calls running at once.")


def _outcome(result: ToolCallResult) -> str:
    if result.ok:
        return "ok"
    return "retryable" if result.retryable else "failed"


class ToolExecutorService(Service):
    name = "tool-executor"

    def setup(self) -> None:
        self.tools = ToolRegistry(builtin_tools())
        self.options = ExecutorOptions.model_validate(self.settings.tools)
        self._slots = asyncio.Semaphore(self.options.max_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self.calls = Counter(
            "agentstream_tool_calls_total", "Tool calls by tool and outcome", ["tool", "outcome"],
            registry=self.registry,
        )
        self.durations = Histogram(
            "agentstream_tool_call_seconds", "Tool call duration", ["tool"], registry=self.registry
        )
        self.broker.subscriber(self.topics.tool_calls, **self.subscriber_options())(self.on_call)

    async def on_call(self, msg: KafkaMessage) -> None:
        request = self.decode(msg, ToolCallRequestAdapter)
        if isinstance(request, ValidationError):
            await self.dead_letter(msg, "invalid ToolCallRequest: " + describe_validation_error(request))
            return
        task = asyncio.create_task(self._handle(request), name=f"tool:{request.idempotency_key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, request: ToolCallRequest) -> None:
        try:
            async with self._slots:
                result = await execute(self.tools, request, self.settings.runner.tool_timeout_s)
            await self.publish(self.topics.tool_results, result, request.conversation_key)
        except Exception:
            self.log.exception("tool result not published", call=request.idempotency_key, tool=request.tool)
            return
        self.calls.labels(request.tool, _outcome(result)).inc()
        self.durations.labels(request.tool).observe(result.duration_ms / 1000)
        self.log.info("tool call done", call=request.idempotency_key, tool=request.tool, ok=result.ok,
                      retryable=result.retryable, duration_ms=round(result.duration_ms, 1))

    async def on_stop(self) -> None:
        # The broker is stopped: results of calls still running could not be published.
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
