"""What the pipeline needs from a model: a typed stream of chunks.

A connector turns one `LLMRequest` into an async stream of `Chunk`s. Chunks are
typed so the pipeline never parses provider payloads: text arrives as `TextDelta`,
a complete tool call as `ToolCallChunk`, and the call's token counts as `UsageChunk`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage, Usage
from agentstream.tools_catalog import ToolSpec
from agentstream_runner.connectors.retry import RetryPolicy, with_retries

T = TypeVar("T")
SdkError = TypeVar("SdkError", bound=Exception)


@dataclass(frozen=True)
class LLMRequest:
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()  # empty when the connector lacks the `tools` capability
    options: dict[str, Any] = field(default_factory=dict)  # sampling options (temperature, max_tokens, ...)

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Answer text, as the model streams it (`message.delta kind=text`)."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """Reasoning text, for models that stream it (`message.delta kind=thinking`)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """One tool call, complete: connectors assemble streamed pieces first (`ToolCallAssembler`)."""

    call_id: str
    name: str
    arguments: str  # raw JSON, exactly as the model produced it


@dataclass(frozen=True, slots=True)
class UsageChunk:
    """The call's token counts, when the provider reports them (at the end of the stream)."""

    usage: Usage


Chunk = TextDelta | ThinkingDelta | ToolCallChunk | UsageChunk


# -- streamed tool calls, assembled ---------------------------------------------------
# OpenAI-style deltas carry an `index` per call; the first piece of a call has its id
# and name, later pieces append to its JSON arguments. Pure and provider-neutral.
@dataclass
class _Partial:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAssembler:
    def __init__(self) -> None:
        self._calls: dict[int, _Partial] = {}

    def add(
        self, index: int, call_id: str | None = None, name: str | None = None, arguments: str | None = None
    ) -> None:
        call = self._calls.setdefault(index, _Partial())
        call.call_id = call.call_id or (call_id or "")
        call.name += name or ""
        if arguments:
            call.arguments.append(arguments)

    def calls(self) -> list[ToolCallChunk]:
        """The complete calls, in index order (ids filled in when a server omits them)."""
        return [
            ToolCallChunk(call_id=c.call_id or f"call_{i}", name=c.name, arguments="".join(c.arguments) or "{}")
            for i, c in sorted(self._calls.items())
        ]


class Configured:
    """Base of the built-in connectors: `id` and `capabilities` come from their settings."""

    def __init__(self, settings: ConnectorSettings) -> None:
        self._settings = settings

    @property
    def id(self) -> str:
        return self._settings.id

    @property
    def capabilities(self) -> frozenset[str]:
        return frozenset(self._settings.capabilities)


class RemoteConnector(Configured):
    """Base of the connectors that call a model server through its SDK: the SDK's own retries
    are off, its errors are classified here and the transient ones retried (retry.py)."""

    def __init__(self, settings: ConnectorSettings, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        super().__init__(settings)
        self._policy = RetryPolicy(attempts=settings.retry_attempts, base_delay_s=settings.retry_base_delay_s)
        self._sleep = sleep
        self.on_retry: Callable[[], None] | None = None  # set by `Connectors.open` (the runner's metrics)

    async def _request(
        self, send: Callable[[], Awaitable[T]], sdk_error: type[SdkError], classify: Callable[[SdkError], Exception]
    ) -> T:
        """`send()`, retried while `classify` calls its failure `Transient`."""

        async def attempt() -> T:
            try:
                return await send()
            except sdk_error as err:
                raise classify(err) from err

        return await with_retries(attempt, self._policy, self._sleep, self.on_retry)


@runtime_checkable
class Connector(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]: ...
