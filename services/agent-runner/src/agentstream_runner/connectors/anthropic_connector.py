"""The `anthropic` connector: the Messages API through the official SDK.

System messages become the `system` parameter, assistant tool calls `tool_use`
blocks and tool results `tool_result` blocks of a user message. Streamed events
map to chunks: text and thinking deltas, tool-use blocks assembled from their
`input_json_delta` pieces, usage from `message_start`/`message_delta`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anthropic

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage, MessageRole, Usage
from agentstream_runner.connectors import base
from agentstream_runner.connectors.retry import LLMError, Transient, retry_after_seconds

SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "stop_sequences")


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _content(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == MessageRole.TOOL:
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _arguments(c.arguments)} for c in message.tool_calls
    ]
    return blocks


def to_anthropic_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages); consecutive same-role turns are merged as the API requires."""
    system = "\n\n".join(m.content for m in messages if m.role == MessageRole.SYSTEM)
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == MessageRole.SYSTEM:
            continue
        role = "assistant" if message.role == MessageRole.ASSISTANT else "user"
        blocks = _content(message)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def build_payload(settings: ConnectorSettings, request: base.LLMRequest) -> dict[str, Any]:
    system, messages = to_anthropic_messages(list(request.messages))
    payload: dict[str, Any] = {
        "model": settings.model or "claude",
        "messages": messages,
        "max_tokens": settings.max_tokens,
        **{k: request.options[k] for k in SAMPLING_KEYS if k in request.options},
    }
    if system:
        payload["system"] = system
    if request.tools:
        payload["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
        ]
    return payload


def classify(err: anthropic.AnthropicError) -> Exception:
    if isinstance(err, anthropic.APIStatusError):
        detail = f"HTTP {err.status_code}: {err.message}"
        if err.status_code in {429, 500, 502, 503, 504, 529}:
            return Transient(detail, retry_after_seconds(err.response.headers))
        return LLMError(f"model request rejected ({detail})")
    if isinstance(err, anthropic.APIConnectionError):
        return Transient(f"{type(err).__name__}: {err}")
    return LLMError(f"model call failed: {type(err).__name__}: {err}")


class EventMapper:
    """Raw stream events → chunks (pure; fed one event at a time)."""

    def __init__(self) -> None:
        self.calls = base.ToolCallAssembler()
        self.usage = Usage(llm_calls=1)

    def feed(self, event: Any) -> list[base.Chunk]:
        match event.type:
            case "message_start":
                used = event.message.usage
                self.usage = Usage(
                    prompt_tokens=used.input_tokens or 0, completion_tokens=used.output_tokens or 0, llm_calls=1
                )
            case "message_delta" if event.usage is not None:
                self.usage = Usage(
                    prompt_tokens=self.usage.prompt_tokens,
                    completion_tokens=event.usage.output_tokens or 0,
                    llm_calls=1,
                )
            case "content_block_start" if event.content_block.type == "tool_use":
                self.calls.add(event.index, event.content_block.id, event.content_block.name)
            case "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta":
                    return [base.TextDelta(delta.text)]
                if delta.type == "thinking_delta":
                    return [base.ThinkingDelta(delta.thinking)]
                if delta.type == "input_json_delta":
                    self.calls.add(event.index, arguments=delta.partial_json)
        return []

    def finish(self) -> list[base.Chunk]:
        return [*self.calls.calls(), base.UsageChunk(self.usage)]


class AnthropicConnector(base.RemoteConnector):
    def __init__(self, settings: ConnectorSettings, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        super().__init__(settings, sleep)
        self._client = anthropic.AsyncAnthropic(
            base_url=settings.base_url,
            api_key=settings.api_key() or "not-set",
            max_retries=0,
            timeout=settings.timeout_s,
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(self, request: base.LLMRequest) -> AsyncGenerator[base.Chunk, None]:
        payload = build_payload(self._settings, request)
        stream = await self._request(
            lambda: self._client.messages.create(**payload, stream=True), anthropic.AnthropicError, classify
        )
        mapper = EventMapper()
        try:
            async for event in stream:
                for chunk in mapper.feed(event):
                    yield chunk
        except anthropic.AnthropicError as err:
            raise LLMError(f"model stream broke: {type(err).__name__}: {err}") from err
        finally:
            await stream.close()
        for chunk in mapper.finish():
            yield chunk
