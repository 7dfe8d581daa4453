"""One round of tool calls: announce them, run them in parallel through the
tool-executor, report the results and feed them to memory, wrapped in a `tool` step.

Each call is bounded by `tool_timeout_s`; a call that times out becomes a failed,
non-retryable result so the model still gets an answer for every call it made.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from agentstream.config import RunnerSettings
from agentstream.contracts import (
    ChatMessage,
    StartRun,
    ToolCall,
    ToolCallRequest,
    ToolCallResult,
    ToolCallSpec,
    ToolResult,
    utcnow,
)
from agentstream_runner.context import RunPorts
from agentstream_runner.emitter import RunEmitter
from agentstream_runner.heartbeat import heartbeat
from agentstream_runner.steps import step

TIMED_OUT = "tool timed out"


def tool_message(result: ToolCallResult) -> ChatMessage:
    """What the model reads back for one call."""
    content = result.content if result.ok else f"error: {result.error}"
    return ChatMessage(role="tool", content=content, name=result.tool, tool_call_id=result.call_id)


async def call_tool(ports: RunPorts, start: StartRun, call: ToolCallSpec, timeout_s: float) -> ToolCallResult:
    request = ToolCallRequest(
        run_id=start.run_id, root_run_id=start.run_id, conversation_key=start.conversation_key,
        call_id=call.id, tool=call.name, arguments=call.arguments, attempt=1,
        deadline=utcnow() + timedelta(seconds=timeout_s),
    )
    try:
        async with asyncio.timeout(timeout_s):
            return await ports.call_tool(request)
    except TimeoutError:
        return ToolCallResult(
            run_id=start.run_id, root_run_id=start.run_id, conversation_key=start.conversation_key,
            call_id=call.id, tool=call.name, ok=False, error=TIMED_OUT, retryable=False,
            duration_ms=timeout_s * 1000,
        )


async def tool_round(
    events: RunEmitter,
    ports: RunPorts,
    runner: RunnerSettings,
    start: StartRun,
    calls: list[ToolCallSpec],
    memory: list[ChatMessage],
    turn: int,
) -> list[ToolCallResult]:
    """Run `calls` (made in the latest assistant message); appends one tool message per result."""
    step_input = {"turn": turn, "calls": [c.model_dump() for c in calls]}
    async with step(events, "tool", f"tool-{turn}", step_input) as record:
        for call in calls:
            await events.emit(ToolCall, call_id=call.id, tool=call.name, arguments=call.arguments, attempt=1)
        async with heartbeat(events, runner.heartbeat_s):
            results = await asyncio.gather(*(call_tool(ports, start, c, runner.tool_timeout_s) for c in calls))
        for r in results:
            await events.emit(
                ToolResult, call_id=r.call_id, tool=r.tool, ok=r.ok, content=r.content, error=r.error,
                retryable=r.retryable, duration_ms=r.duration_ms,
            )
        memory.extend(tool_message(r) for r in results)
        record.output = {"results": [r.model_dump(include={"call_id", "tool", "ok", "content", "error"}) for r in results]}
        record.memory = memory
    return list(results)
