"""A call's coordinates: the request fields that say which call of which run and conversation.

Everything the executor says about a call (its result, its heartbeats, its log lines)
carries them, so that the answer finds its run and a log line its call.
"""

from __future__ import annotations

from typing import Any

from agentstream.contracts import ToolCallRequest

# Where the answer goes and which call it answers; a `ToolCallResult` and a `ToolHeartbeat` repeat them.
COORDINATES = {"run_id", "root_run_id", "conversation_key", "call_id", "tool"}


def coordinates(request: ToolCallRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in COORDINATES}  # plain strings: no model_dump needed


def log_fields(request: ToolCallRequest) -> dict[str, str]:
    """The fields a log line about the call is bound to."""
    return {
        "run_id": request.run_id,
        "call_id": request.call_id,
        "tool": request.tool,
        "conversation_key": request.conversation_key,
    }
