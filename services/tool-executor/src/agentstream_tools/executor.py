"""Executing one tool call: lookup → arguments → run under a timeout → result.

Every outcome, good or bad, becomes a `ToolCallResult`; failures are classified
by `validation.classify`. `duration_ms` covers the whole call. An exception that is
not a `ToolFailure` is logged whole, with the call's coordinates; the model only
learns its type.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from agentstream.contracts import ToolCallRequest, ToolCallResult, utcnow
from agentstream.observability import get_logger
from agentstream_tools.arguments import Arguments, parse_arguments
from agentstream_tools.call_context import current_call
from agentstream_tools.call_coordinates import coordinates, log_fields
from agentstream_tools.registry import ToolRegistry
from agentstream_tools.validation import ToolFailure, ToolTimeout, classify, lookup

log = get_logger("agentstream.tool-executor")


def _time_left(request: ToolCallRequest, timeout_s: float) -> float:
    """The tool's timeout, shortened to the request's deadline."""
    if request.deadline is None:
        return timeout_s
    left = (request.deadline - utcnow()).total_seconds()
    if left <= 0:
        raise ToolTimeout(f"deadline of {request.tool} passed before it ran")
    return min(timeout_s, left)


async def _run(registry: ToolRegistry, request: ToolCallRequest, default_timeout_s: float) -> tuple[str, Arguments]:
    tool = lookup(registry, request.tool)
    args = parse_arguments(tool, request.arguments)
    timeout_s = _time_left(request, tool.timeout_s or default_timeout_s)
    token = current_call.set(request)
    try:
        async with asyncio.timeout(timeout_s):
            return await tool.run(args.values), args
    except TimeoutError:
        raise ToolTimeout(f"tool {tool.name} timed out after {timeout_s:g} s") from None
    finally:
        current_call.reset(token)


def answer(request: ToolCallRequest, **outcome: Any) -> ToolCallResult:
    """The result of `request`: its coordinates, and `outcome` (ok, content or error, retryable, duration_ms)."""
    return ToolCallResult(**coordinates(request), **outcome)


async def execute(
    registry: ToolRegistry,
    request: ToolCallRequest,
    default_timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> ToolCallResult:
    started = clock()
    try:
        content, args = await _run(registry, request, default_timeout_s)
    except Exception as err:  # every failure is an answer for the model, classified by type
        if not isinstance(err, ToolFailure):
            log.error("tool raised", **log_fields(request), exc_info=err)
        failure = classify(err)
        return answer(
            request,
            ok=False,
            error=failure.message,
            retryable=failure.retryable,
            duration_ms=(clock() - started) * 1000,
        )
    extra: dict[str, Any] = {}
    if args.repairs:  # said in the content, which the model reads, and in `data` for the record
        content, extra["data"] = f"{content}\n{args.note()}", {"argument_repairs": list(args.repairs)}
    return answer(request, ok=True, content=content, duration_ms=(clock() - started) * 1000, **extra)
