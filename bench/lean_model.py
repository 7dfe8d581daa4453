"""A lean OpenAI-compatible streaming model for benchmarks: echo only, at a fixed pace.

`agentstream_testing.fake_openai` is built for tests (every mode, a raw ASGI app under
uvicorn) and spends ~45 µs of CPU per streamed chunk. At 200 streams × 100 tokens/s that
is most of a core on the machine that also runs the broker and the runner — CPU a real
model server, on its own machine, would never take from them. This one speaks the same
protocol (HTTP/1.1, `text/event-stream`, one `chat.completion.chunk` per token, a finish
chunk, a usage chunk, `data: [DONE]`) from a bare asyncio protocol with pre-encoded
chunks and one timer per token, and records the same timings at `GET /_fake/requests`.

    python -m bench.lean_model --echo-token-delay 0.01     # prints its base URL, serves until killed
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any

from agentstream_testing.fake_openai import tokenize

_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
_ENVELOPE = b'{"id":"chatcmpl-lean","object":"chat.completion.chunk","created":0,"model":"lean","choices":'


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(choices: bytes, extra: bytes = b"") -> bytes:
    return _chunked(b"data: " + _ENVELOPE + choices + extra + b"}\n\n")


def _token_event(token: str, first: bool) -> bytes:
    delta = {"role": "assistant", "content": token} if first else {"content": token}
    return _event(b'[{"index":0,"delta":' + json.dumps(delta).encode() + b',"finish_reason":null}]')


class _Stream:
    """One streamed answer: its tokens go out on timers, paced against the stream's start."""

    def __init__(self, model: LeanModel, transport: asyncio.Transport, body: dict[str, Any]) -> None:
        self.model, self.transport = model, transport
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        self.text = str(users[-1].get("content") or "") if users else ""
        self.tokens = tokenize(self.text)
        self.usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.record: dict[str, Any] = {
            "user": self.text,
            "received_at": time.monotonic(),
            "first_token_at": None,
            "last_token_at": None,
            "completed_at": None,
            "closed_at": None,
        }
        self.started = self.record["received_at"]
        self.index = 0
        self.timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.transport.write(_HEAD)
        self._next()

    def _next(self) -> None:
        if self.transport.is_closing():
            return
        now = time.monotonic()
        if self.index < len(self.tokens):
            self.transport.write(_token_event(self.tokens[self.index], self.index == 0))
            self.record["first_token_at"] = self.record["first_token_at"] or now
            self.record["last_token_at"] = now
            self.index += 1
            if self.index < len(self.tokens):
                due = self.started + self.index * self.model.token_delay_s
                self.timer = asyncio.get_running_loop().call_at(due, self._next)
                return
        self._finish()

    def _finish(self) -> None:
        out = _event(b'[{"index":0,"delta":{},"finish_reason":"stop"}]')
        if self.usage:
            n = len(self.tokens)
            out += _event(
                b"[]", b',"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}' % (n, n, 2 * n)
            )
        self.transport.write(out + _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        self.record["completed_at"] = time.monotonic()
        self.timer = None

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.record["closed_at"] = time.monotonic()


class _Connection(asyncio.Protocol):
    """HTTP/1.1 keep-alive: requests are read one after another (Content-Length bodies)."""

    def __init__(self, model: LeanModel) -> None:
        self.model = model
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.stream: _Stream | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stream is not None and self.stream.timer is not None:
            self.stream.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].decode("latin-1")
            length = next(
                (
                    int(line.split(":", 1)[1])
                    for line in head.split("\r\n")[1:]
                    if line.lower().startswith("content-length:")
                ),
                0,
            )
            if len(self.buffer) < end + 4 + length:
                return
            body, self.buffer = self.buffer[end + 4 : end + 4 + length], self.buffer[end + 4 + length :]
            self._handle(head.split(" ", 2), body)

    def _handle(self, request_line: list[str], body: bytes) -> None:
        assert self.transport is not None
        method, path = request_line[0], request_line[1]
        if method == "GET" and path == "/_fake/requests":
            payload = json.dumps({"requests": [s.record for s in self.model.streams]}).encode()
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(payload), payload)
            )
        elif method == "POST" and path.endswith("/chat/completions"):
            self.stream = _Stream(self.model, self.transport, json.loads(body or b"{}"))
            self.model.streams.append(self.stream)
            self.stream.start()
        else:
            self.transport.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")


class LeanModel:
    def __init__(self, token_delay_s: float) -> None:
        self.token_delay_s = token_delay_s
        self.streams: list[_Stream] = []
        self.port = 0

    async def serve(self, ready: asyncio.Future[str] | None = None) -> None:
        server = await asyncio.get_running_loop().create_server(lambda: _Connection(self), "127.0.0.1", 0)
        self.port = int(server.sockets[0].getsockname()[1])
        if ready is not None:
            ready.set_result(f"http://127.0.0.1:{self.port}/v1")
        async with server:
            await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lean_model")
    parser.add_argument("--echo-token-delay", type=float, default=0.01, help="seconds between tokens")
    args = parser.parse_args()

    async def run() -> None:
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(LeanModel(args.echo_token_delay).serve(ready))
        print(await ready, flush=True)
        await task

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
