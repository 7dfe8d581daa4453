"""The openai connector's stream reader: SSE framing as the spec reads it, and what a real
server may send mid-stream (CRLF, comments, split writes, sparse chunks, an error event),
over real HTTP from a bare asyncio server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage
from agentstream_runner.connectors.base import LLMRequest, TextDelta, UsageChunk
from agentstream_runner.connectors.openai_connector import OpenAIConnector
from agentstream_runner.connectors.openai_sse import sse_data
from agentstream_runner.connectors.retry import LLMError


async def parts(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def events(*chunks: bytes) -> list[bytes]:
    return [data async for data in sse_data(parts(*chunks))]


async def test_events_are_split_as_the_sse_spec_reads_them():
    assert await events(b"data: one\n\ndata: two\n\n") == [b"one", b"two"]
    assert await events(b"data: o", b"ne\r", b"\n\r\ndata:two\r\n\r\n") == [b"one", b"two"]  # split, CRLF
    assert await events(b": keep-alive\n\nevent: x\nid: 3\ndata: a\ndata: b\n\n") == [b"a\nb"]
    assert await events(b"data:  two spaces\n\n") == [b" two spaces"]  # only one space is dropped
    assert await events(b"data: done\n\ndata: cut off") == [b"done"]  # an unfinished event is dropped


def chunk(content: str | None = None, **extra: object) -> bytes:
    delta = {} if content is None else {"content": content}
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        **extra,
    }
    return json.dumps(body).encode()


class RawSSEServer:
    """HTTP/1.1 on 127.0.0.1 answering every request with the given writes, then closing."""

    def __init__(self, writes: list[bytes]) -> None:
        self.writes = writes
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        for data in self.writes:
            writer.write(data)
            await writer.drain()
            await asyncio.sleep(0.005)  # separate TCP writes
        writer.close()


async def stream(writes: list[bytes], http_client: str) -> list:
    async with RawSSEServer(writes) as base_url:
        conn = OpenAIConnector(
            ConnectorSettings(id="m", type="openai", base_url=base_url, model="m", http_client=http_client)
        )
        try:
            return [c async for c in conn.stream(LLMRequest(messages=[ChatMessage(role="user", content="hi")]))]
        finally:
            await conn.aclose()


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
async def test_crlf_comments_split_writes_and_a_sparse_chunk_all_come_through(http_client):
    sparse = json.dumps({"id": "c", "choices": [{"index": 0, "delta": {"content": " sparse"}}]}).encode()
    usage = chunk(usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
    first = b"data: " + chunk("Hel")
    writes = [
        b": processing\r\n\r\n",
        first[:20],
        first[20:] + b"\r\n\r\n",
        b"data: " + chunk("lo") + b"\r\n\r\n",
        b"data: " + sparse + b"\n\n",
        b"data: " + usage + b"\n\n",
        b"data: [DONE]\n\n",
    ]
    chunks = await stream(writes, http_client)
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "Hello sparse"
    assert isinstance(chunks[-1], UsageChunk) and chunks[-1].usage.completion_tokens == 4


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
async def test_an_error_event_mid_stream_breaks_the_stream_with_its_message(http_client):
    error = json.dumps({"error": {"message": "model overloaded", "type": "server_error"}}).encode()
    with pytest.raises(LLMError, match="model stream broke.*model overloaded"):
        await stream([b"data: " + chunk("partial") + b"\n\n", b"data: " + error + b"\n\n"], http_client)


async def test_invalid_json_mid_stream_is_a_broken_stream_not_a_crash():
    with pytest.raises(LLMError, match="model stream broke"):
        await stream([b"data: " + chunk("partial") + b"\n\n", b"data: {not json\n\n"], "aiohttp")
