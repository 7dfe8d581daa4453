"""The anthropic connector through the official SDK against a tiny fake Messages API
(real HTTP, real SSE), including a retried 529 and a 400 that is not retried."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage, Usage
from agentstream.tools_catalog import CLOCK
from agentstream_runner.connectors.anthropic_connector import AnthropicConnector
from agentstream_runner.connectors.base import LLMRequest, TextDelta, ThinkingDelta, ToolCallChunk, UsageChunk
from agentstream_runner.connectors.retry import LLMError
from agentstream_testing.loopback_server import LoopbackServer, Receive, Scope, Send, read_body, send_json

EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking"}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": " the time"}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "tu_1", "name": "clock", "input": {}},
    },
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"timez'}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": 'one": "UTC"}'}},
    {"type": "content_block_stop", "index": 2},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 9},
    },
    {"type": "message_stop"},
]


class FakeAnthropic:
    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses  # answered in order before the stream; 200 = stream
        self.bodies: list[dict[str, Any]] = []

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.bodies.append(json.loads(await read_body(receive)))
        status = self.statuses.pop(0) if self.statuses else 200
        if status != 200:
            error = {"type": "error", "error": {"type": "overloaded_error", "message": f"fake {status}"}}
            await send_json(send, status, error, [(b"retry-after", b"0")])
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for event in EVENTS:
            data = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@asynccontextmanager
async def serving(fake: FakeAnthropic) -> AsyncIterator[str]:
    server = LoopbackServer(fake.app, "fake-anthropic", interface="asgi3")
    port = await server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await server.stop()


def connector(base_url: str) -> AnthropicConnector:
    async def no_sleep(seconds: float) -> None:
        return None

    settings = ConnectorSettings(id="claude", type="anthropic", base_url=base_url, model="claude-test")
    return AnthropicConnector(settings, sleep=no_sleep)


REQUEST = LLMRequest(
    messages=[ChatMessage(role="system", content="brief"), ChatMessage(role="user", content="t?")], tools=(CLOCK,)
)


async def test_stream_through_the_sdk_with_a_retried_overload():
    fake = FakeAnthropic([529])
    async with serving(fake) as url:
        chunks = [c async for c in connector(url).stream(REQUEST)]
    assert chunks == [
        ThinkingDelta("hmm"),
        TextDelta("Checking"),
        TextDelta(" the time"),
        ToolCallChunk(call_id="tu_1", name="clock", arguments='{"timezone": "UTC"}'),
        UsageChunk(Usage(prompt_tokens=12, completion_tokens=9, llm_calls=1)),
    ]
    assert len(fake.bodies) == 2
    body = fake.bodies[-1]
    assert body["system"] == "brief" and body["stream"] is True and body["tools"][0]["name"] == "clock"


async def test_bad_request_is_not_retried():
    fake = FakeAnthropic([400, 200])
    async with serving(fake) as url:
        with pytest.raises(LLMError, match="rejected"):
            [c async for c in connector(url).stream(REQUEST)]
    assert len(fake.bodies) == 1
