"""Model connectors: a typed chunk stream per request, and how a run picks one."""

from agentstream_runner.connectors.base import (
    Chunk,
    Connector,
    LLMRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
    UsageChunk,
)
from agentstream_runner.connectors.resolve import Connectors, RoleOverrides, resolve_connector
from agentstream_runner.connectors.scripted import ScriptedConnector

__all__ = [
    "Chunk",
    "Connector",
    "Connectors",
    "LLMRequest",
    "RoleOverrides",
    "ScriptedConnector",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallChunk",
    "UsageChunk",
    "resolve_connector",
]
