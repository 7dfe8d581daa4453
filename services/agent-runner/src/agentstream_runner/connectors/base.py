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


@dataclass(frozen=True)
class LLMRequest:
    messages: Sequence[ChatMessage]
    tools: Sequence[str] = ()
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallChunk:
    call_id: str
    name: str
    arguments: str  # raw JSON, exactly as the model produced it


@dataclass(frozen=True)
class UsageChunk:
    usage: Usage


Chunk = TextDelta | ToolCallChunk | UsageChunk


@runtime_checkable
class Connector(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]: ...
