"""A streamed chat completion read straight into chunks.

The openai SDK reads a stream through its SSE decoder (line by line, a `ServerSentEvent`
per event), `json.loads` and then builds the chunk: ~25 µs of CPU per chunk, a third of
what a runner spends reading a model's answer. `ChunkStream` is the SDK's own
`AsyncStream` (the SDK opens, authenticates, retries and closes the request as always)
whose events are split from the body bytes and validated from JSON in one step by
pydantic-core. What it does not recognise goes the SDK's way: a chunk that does not
validate is built leniently by the client, an `error` event raises `openai.APIError`,
and a transport failure while reading raises `openai.APIConnectionError`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import openai
import pydantic
from openai.types.chat import ChatCompletionChunk

STREAM_ERROR = "An error occurred during streaming"  # the SDK's text when the server gives none


async def sse_data(parts: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The `data` of each event of a `text/event-stream` body, as the SSE spec reads it:
    lines end in LF or CRLF, a blank line ends an event, several `data` lines are joined by
    LF, one space after the colon is dropped, comments and other fields are ignored, and
    an event the body ends in the middle of is not dispatched."""
    pending = b""
    data: list[bytes] = []
    async for part in parts:
        pending += part
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    yield b"\n".join(data)
                    data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)


class ChunkStream(openai.AsyncStream[ChatCompletionChunk]):
    async def __stream__(self) -> AsyncIterator[ChatCompletionChunk]:
        events = sse_data(self.response.aiter_bytes())
        try:
            async for data in events:
                if data.startswith(b"[DONE]"):
                    async for _ in events:  # read the body to its end: the connection is reused
                        pass
                    return
                yield self._chunk(data)
        except openai.OpenAIError:
            raise
        except Exception as err:  # reading the body failed: the SDK reports it the same way
            raise openai.APIConnectionError(
                message=f"reading the stream failed: {err!r}", request=self.response.request
            ) from err

    def _chunk(self, data: bytes) -> ChatCompletionChunk:
        try:
            return ChatCompletionChunk.model_validate_json(data)
        except pydantic.ValidationError:
            pass
        parsed: Any = json.loads(data)
        if isinstance(parsed, dict) and parsed.get("error"):
            error = parsed["error"]
            message = error.get("message") if isinstance(error, dict) else None
            raise openai.APIError(
                message if isinstance(message, str) and message else STREAM_ERROR, self.response.request, body=error
            )
        # A server that leaves a required field out: the SDK's lenient construction.
        chunk: ChatCompletionChunk = self._client._process_response_data(
            data=parsed, cast_to=ChatCompletionChunk, response=self.response
        )
        return chunk
