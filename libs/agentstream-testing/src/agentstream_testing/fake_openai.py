"""A fake OpenAI-compatible LLM server for tests: real HTTP on 127.0.0.1, real SSE.

`POST /v1/chat/completions` answers each request with the next scripted `Turn`
(or echoes the last user message when none is queued; a turn added with `when` is taken
only by a request it matches, so concurrent runs can each get their own): text deltas, tool-call
deltas split across chunks like real servers send them, `reasoning_content`
deltas, a usage chunk when `stream_options.include_usage` is set, HTTP errors
(`mode="429"`, `"500"`, any status) and slow streams (`mode="slow"`).

Every request is recorded (`requests`): its body and, measured at the server with
`time.monotonic()`, when its first and last token went out and when the client
dropped the connection early — so a test can assert how fast an interrupt closed
the stream. A raw ASGI app (no framework) keeps the disconnect watch explicit.
`GET /_fake/requests` returns those timings as JSON, and `python -m
agentstream_testing.fake_openai` runs the fake in its own process (benchmarks: the
model's CPU is then not the runner's); its `time.monotonic()` is the same clock.

    async with FakeOpenAI() as fake:
        fake.add_turn(text="hi", tool_calls=[("calculator", {"expression": "1+1"})])
        client = AsyncOpenAI(base_url=fake.base_url, api_key="x")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentstream.lifecycle import StartStop
from agentstream_testing.loopback_server import LoopbackServer, Receive, Scope, Send, read_body, send_json

_TOKEN = re.compile(r"\s*\S+|\s+$")
SLOW_TOKEN_DELAY_S = 0.2


def tokenize(text: str) -> list[str]:
    """Words with the whitespace before them: the tokens join back to the text."""
    return _TOKEN.findall(text)


@dataclass
class Turn:
    """One scripted answer. `mode`: "ok", "slow", or an HTTP status ("429", "500", "400", ...)."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    reasoning: str = ""
    mode: str = "ok"
    retry_after: float | None = None
    token_delay_s: float | None = None
    usage: tuple[int, int] | None = None  # (prompt, completion); counted from words when None
    when: Callable[[dict[str, Any]], bool] | None = None  # only a request whose body it matches takes it

    @property
    def status(self) -> int:
        return int(self.mode) if self.mode.isdigit() else 200

    @property
    def delay_s(self) -> float:
        if self.token_delay_s is not None:
            return self.token_delay_s
        return SLOW_TOKEN_DELAY_S if self.mode == "slow" else 0.0


@dataclass
class ReceivedRequest:
    """One request as the server saw it (times are `time.monotonic()`)."""

    body: dict[str, Any]
    received_at: float
    turn: Turn
    first_token_at: float | None = None
    last_token_at: float | None = None
    completed_at: float | None = None
    closed_at: float | None = None  # the client dropped the connection before the end
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names

    @property
    def closed_early(self) -> bool:
        return self.closed_at is not None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def timings(self) -> dict[str, Any]:
        """What `GET /_fake/requests` reports: the last user text and the server's clock readings."""
        return {
            "user": _echo(self.body),
            "received_at": self.received_at,
            "first_token_at": self.first_token_at,
            "last_token_at": self.last_token_at,
            "completed_at": self.completed_at,
            "closed_at": self.closed_at,
        }


def _words(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "").split()) for m in messages)


def _echo(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""


def _arg_pieces(arguments: str, parts: int = 3) -> list[str]:
    size = max(1, -(-len(arguments) // parts))
    return [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]


class _Chunks:
    """Builds the OpenAI `chat.completion.chunk` payloads of one streamed answer."""

    def __init__(self, model: str, seq: int) -> None:
        self.base = {
            "id": f"chatcmpl-{seq}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

    def delta(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**self.base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def usage(self, prompt: int, completion: int) -> dict[str, Any]:
        return {
            **self.base,
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }


class FakeOpenAI(StartStop):
    def __init__(self, model: str = "fake-model", echo_token_delay_s: float = 0.0) -> None:
        self.model = model
        self.echo_token_delay_s = echo_token_delay_s
        self.requests: list[ReceivedRequest] = []
        self._turns: deque[Turn] = deque()
        self._changed = asyncio.Event()  # set whenever a request record changes
        # A raw ASGI app: streamed tokens go out unbuffered, and Nagle must not hold them back.
        self._http = LoopbackServer(self._app, "fake-openai", no_delay=True, interface="asgi3")
        self.port = 0

    # -- script ----------------------------------------------------------------------
    def add_turn(
        self,
        text: str = "",
        tool_calls: list[tuple[str, dict[str, Any]]] | None = None,
        *,
        reasoning: str = "",
        mode: str = "ok",
        retry_after: float | None = None,
        token_delay_s: float | None = None,
        usage: tuple[int, int] | None = None,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> Turn:
        turn = Turn(text, list(tool_calls or []), reasoning, mode, retry_after, token_delay_s, usage, when)
        self._turns.append(turn)
        return turn

    @property
    def pending_turns(self) -> int:
        return len(self._turns)

    @property
    def request_count(self) -> int:
        return len(self.requests)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def wait_for(self, predicate: Callable[[FakeOpenAI], bool], timeout: float = 5.0) -> None:
        """Until `predicate(self)` holds (checked at every change of a request); TimeoutError after `timeout`."""
        async with asyncio.timeout(timeout):
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

    def _touch(self) -> None:
        self._changed.set()

    def _next_turn(self, body: dict[str, Any]) -> Turn:
        for turn in self._turns:  # the first the request may take
            if turn.when is None or turn.when(body):
                self._turns.remove(turn)
                return turn
        return Turn(text=_echo(body), token_delay_s=self.echo_token_delay_s)

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self.port = await self._http.start()

    async def stop(self) -> None:
        await self._http.stop()

    # -- HTTP --------------------------------------------------------------------------
    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] == "GET" and scope["path"].endswith("/models"):  # what `agentstream doctor` asks
            await send_json(send, 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
            return
        if scope["method"] == "GET" and scope["path"] == "/_fake/requests":
            await send_json(send, 200, {"requests": [r.timings() for r in self.requests]})
            return
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            await send_json(send, 404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        body = json.loads(await read_body(receive) or b"{}")
        turn = self._next_turn(body)
        record = ReceivedRequest(
            body=body,
            received_at=time.monotonic(),
            turn=turn,
            headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])},
        )
        self.requests.append(record)
        self._touch()
        if turn.status != 200:
            await self._error(send, turn)
        elif body.get("stream"):
            await self._watch_disconnect(receive, record, self._stream(send, record))
        else:
            await send_json(send, 200, self._completion(record))
            record.completed_at = time.monotonic()
        self._touch()

    async def _watch_disconnect(self, receive: Receive, record: ReceivedRequest, stream: Awaitable[None]) -> None:
        """Stream, and note the moment the client hangs up (the stream is then cancelled)."""
        streaming = asyncio.ensure_future(stream)

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not streaming.done():
                record.closed_at = time.monotonic()
                self._touch()
                streaming.cancel()

        watcher = asyncio.create_task(watch())
        try:
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await streaming
        finally:
            watcher.cancel()

    async def _stream(self, send: Send, record: ReceivedRequest) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        chunks = _Chunks(self.model, len(self.requests))
        turn = record.turn
        completion = 0
        started = time.monotonic()
        for index, payload in enumerate(self._deltas(chunks, turn)):
            if index and turn.delay_s:
                # Paced against the stream's start, not token to token: sleep overshoot does
                # not accumulate, so a stream at N tokens/s really is N tokens/s.
                await asyncio.sleep(max(0.0, started + index * turn.delay_s - time.monotonic()))
            await self._sse(send, payload)
            now = time.monotonic()
            record.first_token_at = record.first_token_at or now
            record.last_token_at = now
            self._touch()
            completion += 1
        finish = "tool_calls" if turn.tool_calls else "stop"
        await self._sse(send, chunks.delta({}, finish))
        if (record.body.get("stream_options") or {}).get("include_usage"):
            prompt, used = turn.usage or (_words(record.messages), completion)
            await self._sse(send, chunks.usage(prompt, used))
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})
        record.completed_at = time.monotonic()

    def _deltas(self, chunks: _Chunks, turn: Turn) -> Iterator[dict[str, Any]]:
        role_sent = False
        for token in tokenize(turn.reasoning):
            yield chunks.delta(
                {"role": "assistant", "reasoning_content": token} if not role_sent else {"reasoning_content": token}
            )
            role_sent = True
        for token in tokenize(turn.text):
            yield chunks.delta({"role": "assistant", "content": token} if not role_sent else {"content": token})
            role_sent = True
        for index, (name, args) in enumerate(turn.tool_calls):
            call_id = f"call_{index + 1}"
            head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            yield chunks.delta({"role": "assistant", "tool_calls": [head]} if not role_sent else {"tool_calls": [head]})
            role_sent = True
            for piece in _arg_pieces(json.dumps(args)):
                yield chunks.delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})

    def _completion(self, record: ReceivedRequest) -> dict[str, Any]:
        turn = record.turn
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.reasoning:
            message["reasoning_content"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{i + 1}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, (n, a) in enumerate(turn.tool_calls)
            ]
        prompt, used = turn.usage or (_words(record.messages), len(tokenize(turn.text)))
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": used, "total_tokens": prompt + used},
        }

    async def _error(self, send: Send, turn: Turn) -> None:
        kind = {429: "rate_limit_error", 400: "invalid_request_error"}.get(turn.status, "server_error")
        headers = [(b"retry-after", str(turn.retry_after).encode())] if turn.retry_after is not None else []
        await send_json(send, turn.status, {"error": {"message": f"fake {turn.status}", "type": kind}}, headers)

    @staticmethod
    async def _sse(send: Send, payload: dict[str, Any]) -> None:
        data = b"data: " + json.dumps(payload).encode() + b"\n\n"
        await send({"type": "http.response.body", "body": data, "more_body": True})


async def _serve_forever(echo_token_delay_s: float) -> None:
    async with FakeOpenAI(echo_token_delay_s=echo_token_delay_s) as fake:
        print(fake.base_url, flush=True)  # the parent reads this line to find the server
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    """`python -m agentstream_testing.fake_openai`: the fake in its own process (benchmarks),
    echoing at `--echo-token-delay` seconds per token; request timings at `GET /_fake/requests`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m agentstream_testing.fake_openai")
    parser.add_argument("--echo-token-delay", type=float, default=0.0, help="seconds between echoed tokens")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(args.echo_token_delay))


if __name__ == "__main__":
    main()
