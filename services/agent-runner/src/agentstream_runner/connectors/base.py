"""What the pipeline needs from a model: a typed stream of chunks.

A connector turns one `LLMRequest` into an async stream of `Chunk`s. Chunks are
typed so the pipeline never parses provider payloads: text arrives as `TextDelta`,
a complete tool call as `ToolCallChunk`, and the call's token counts as `UsageChunk`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentstream.contracts import ChatMessage, Usage
from agentstream.tools_catalog import ToolSpec


@dataclass(frozen=True)
class LLMRequest:
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()  # empty when the connector lacks the `tools` capability
    options: dict[str, Any] = field(default_factory=dict)  # sampling options (temperature, max_tokens, ...)

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools)


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """Reasoning text, for models that stream it (`message.delta kind=thinking`)."""

    text: str


@dataclass(frozen=True)
class ToolCallChunk:
    call_id: str
    name: str
    arguments: str  # raw JSON, exactly as the model produced it


@dataclass(frozen=True)
class UsageChunk:
    usage: Usage


Chunk = TextDelta | ThinkingDelta | ToolCallChunk | UsageChunk


@runtime_checkable
class Connector(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]: ...
