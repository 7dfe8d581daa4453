"""The call a tool is running for: tools that need more than their arguments (the workspace
tools need the conversation) read it here, so every tool keeps the `run(args)` signature."""

from __future__ import annotations

from contextvars import ContextVar

from agentstream.contracts import ToolCallRequest

current_call: ContextVar[ToolCallRequest | None] = ContextVar("agentstream_tool_call", default=None)
