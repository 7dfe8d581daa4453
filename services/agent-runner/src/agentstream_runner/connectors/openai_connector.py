"""The `openai` connector: any OpenAI-compatible server through the official SDK.

Streams text, reasoning (`reasoning_content`, sent by some servers) and tool-call
deltas (assembled into complete calls), and reads usage from the final chunk
(`stream_options.include_usage`). Without the `streaming` capability it makes one
non-streamed call. Transport retries follow `retry.py`; SDK retries are off.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage, MessageRole, Usage
from agentstream_runner.connectors.base import (
    Chunk,
    Configured,
    LLMRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallAssembler,
    UsageChunk,
)
from agentstream_runner.connectors.openai_sse import ChunkStream
from agentstream_runner.connectors.retry import LLMError, RetryPolicy, Transient, retry_after_seconds, with_retries

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "presence_penalty", "frequency_penalty", "stop", "seed")
NO_KEY = "not-needed"  # local OpenAI-compatible servers take any key; the SDK insists on one


def to_openai_message(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == MessageRole.TOOL:
        out["tool_call_id"] = message.tool_call_id
    elif message.name and message.role == MessageRole.USER:
        out["name"] = message.name
    if message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return out


def build_payload(model: str, request: LLMRequest, stream: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "model": model,
        "messages": [to_openai_message(m) for m in request.messages],
        **{k: request.options[k] for k in SAMPLING_KEYS if k in request.options},
    }
    if request.tools:
        payload["tools"] = [{"type": "function", "function": t.model_dump()} for t in request.tools]
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    return payload


def classify(err: openai.OpenAIError) -> Exception:
    """A `Transient` to retry, or the `LLMError` that fails the run."""
    if isinstance(err, openai.APIStatusError):
        detail = f"HTTP {err.status_code}: {err.message}"
        if err.status_code in {429, 500, 502, 503, 504}:
            return Transient(detail, retry_after_seconds(err.response.headers))
        return LLMError(f"model request rejected ({detail})")
    if isinstance(err, openai.APIConnectionError):  # includes APITimeoutError
        return Transient(f"{type(err).__name__}: {err}")
    return LLMError(f"model call failed: {type(err).__name__}: {err}")


def _usage(used: Any) -> Usage:
    return Usage(prompt_tokens=used.prompt_tokens or 0, completion_tokens=used.completion_tokens or 0, llm_calls=1)


class OpenAIConnector(Configured):
    def __init__(self, settings: ConnectorSettings, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        super().__init__(settings)
        # aiohttp: the streamed chunks are the runner's hottest path, and aiohttp reads and
        # parses them with about half the CPU of httpx (bench/run_overhead.py).
        http_client = (
            openai.DefaultAioHttpClient(timeout=settings.timeout_s) if settings.http_client == "aiohttp" else None
        )
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key() or NO_KEY,
            max_retries=0,
            timeout=settings.timeout_s,
            http_client=http_client,
        )
        self._policy = RetryPolicy(attempts=settings.retry_attempts, base_delay_s=settings.retry_base_delay_s)
        self._sleep = sleep

    async def aclose(self) -> None:
        await self._client.close()

    async def _call(self, payload: dict[str, Any]) -> Any:
        # The SDK's generic `post` (its documented way to send a body as built) rather than
        # `chat.completions.create`, which walks every message of the payload against its
        # TypedDicts first: ~25% of a run's own CPU on a busy runner, for a payload that
        # `build_payload` already made plain JSON. Auth and errors: the same code; the
        # stream is read by `ChunkStream` (openai_sse.py).
        async def attempt() -> Any:
            try:
                return await self._client.post(
                    "/chat/completions",
                    body=payload,
                    cast_to=ChatCompletion,
                    stream=bool(payload.get("stream")),
                    stream_cls=ChunkStream,
                )
            except openai.OpenAIError as err:
                raise classify(err) from err

        return await with_retries(attempt, self._policy, self._sleep)

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        streaming = "streaming" in self.capabilities
        payload = build_payload(self._settings.model or "default", request, stream=streaming)
        if not streaming:
            async for chunk in self._single(payload):
                yield chunk
            return
        stream = await self._call(payload)
        calls = ToolCallAssembler()
        usage = Usage(llm_calls=1)
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    delta = choice.delta
                    # An extra field of some servers: read from model_extra, not getattr (which
                    # raises and catches an AttributeError on every chunk of the others).
                    if thinking := (delta.model_extra or {}).get("reasoning_content"):
                        yield ThinkingDelta(thinking)
                    if delta.content:
                        yield TextDelta(delta.content)
                    for tc in delta.tool_calls or []:
                        fn = tc.function
                        calls.add(tc.index, tc.id, fn.name if fn else None, fn.arguments if fn else None)
        except openai.OpenAIError as err:  # mid-stream: text already went out, never retried
            raise LLMError(f"model stream broke: {type(err).__name__}: {err}") from err
        finally:
            await stream.close()  # on cancellation too: the server sees the connection close at once
        for call in calls.calls():
            yield call
        yield UsageChunk(usage)

    async def _single(self, payload: dict[str, Any]) -> AsyncGenerator[Chunk, None]:
        done = await self._call(payload)
        message = done.choices[0].message
        if thinking := getattr(message, "reasoning_content", None):
            yield ThinkingDelta(thinking)
        if message.content:
            yield TextDelta(message.content)
        calls = ToolCallAssembler()
        for i, tc in enumerate(message.tool_calls or []):
            calls.add(i, tc.id, tc.function.name, tc.function.arguments)
        for call in calls.calls():
            yield call
        yield UsageChunk(_usage(done.usage) if done.usage else Usage(llm_calls=1))
