"""One round of tool calls: announce them, run them in parallel through the
tool-executor, report the results and feed them to memory, wrapped in a `tool` step.

Each call is bounded by `tool_timeout_s`; a call that times out becomes a failed,
non-retryable result so the model still gets an answer for every call it made.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from agentstream.contracts import (
    ChatMessage,
    MessageRole,
    StepType,
    ToolCall,
    ToolCallRequest,
    ToolCallResult,
    ToolCallSpec,
    ToolResult,
    utcnow,
)
from agentstream_runner.scope import RunScope
from agentstream_runner.steps import step

TIMED_OUT = "tool timed out"


def tool_message(result: ToolCallResult) -> ChatMessage:
    """What the model reads back for one call."""
    content = result.content if result.ok else f"error: {result.error}"
    return ChatMessage(role=MessageRole.TOOL, content=content, name=result.tool, tool_call_id=result.call_id)


async def call_tool(scope: RunScope, call: ToolCallSpec, attempt: int) -> ToolCallResult:
    timeout_s = scope.ctx.runner.tool_timeout_s
    identity: dict[str, Any] = {
        "run_id": scope.run_id,
        "root_run_id": scope.events.root_run_id,
        "conversation_key": scope.start.conversation_key,
        "call_id": call.id,
        "tool": call.name,
    }
    request = ToolCallRequest(
        **identity, arguments=call.arguments, attempt=attempt, deadline=utcnow() + timedelta(seconds=timeout_s)
    )
    try:
        async with asyncio.timeout(timeout_s):
            return await scope.ctx.ports.call_tool(request)
    except TimeoutError:
        return ToolCallResult(**identity, ok=False, error=TIMED_OUT, retryable=False, duration_ms=timeout_s * 1000)


async def tool_round(scope: RunScope, calls: list[ToolCallSpec], attempt: int = 1) -> list[ToolCallResult]:
    """Run `calls` (made in the latest assistant message); appends one tool message per result."""
    events = scope.events
    step_input = {"attempt": attempt, "calls": [c.model_dump() for c in calls]}
    async with step(events, StepType.TOOL, scope.step_id(StepType.TOOL), step_input) as record:
        for call in calls:
            await events.emit(ToolCall, call_id=call.id, tool=call.name, arguments=call.arguments, attempt=attempt)
        # No heartbeat of its own: the pipeline heartbeats for the whole run.
        results = await asyncio.gather(*(call_tool(scope, c, attempt) for c in calls))
        for r in results:
            await events.emit(
                ToolResult,
                call_id=r.call_id,
                tool=r.tool,
                ok=r.ok,
                content=r.content,
                error=r.error,
                retryable=r.retryable,
                duration_ms=r.duration_ms,
            )
        scope.memory.extend(tool_message(r) for r in results)
        record.output = {
            "results": [r.model_dump(include={"call_id", "tool", "ok", "content", "error"}) for r in results]
        }
        record.memory = scope.memory
    return list(results)
