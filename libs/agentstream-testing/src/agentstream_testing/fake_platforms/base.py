"""What every fake platform shares: a real HTTP server on 127.0.0.1, call records,
messages per chat, a per-chat rate limit and scripted failures.

Subclasses add the platform's routes and say how it spells a rate limit and an error.
Faults for chaos tests: `throttle` (429 for one chat until a time), `land_late` (no
answer until the client gave up, then the call takes effect) and `lose_answer` (the
call takes effect at once, its answer comes after the client gave up).
Every request is recorded as a `Call` (method, chat, body, status, arrival time), so
tests prove what reached the platform: how many calls, how far apart per chat, and
that no message was posted twice.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from agentstream.lifecycle import StartStop
from agentstream_testing.loopback_server import LoopbackServer

RATE_TOLERANCE_S = 0.05  # calls this much early still pass (clock jitter between client and server)


@dataclass
class Call:
    method: str
    chat_id: str
    body: dict[str, Any]
    status: int = 200
    at: float = field(default_factory=time.monotonic)
    message_id: str | None = None
    answer_after_s: float = 0.0  # the call was applied; its answer is held this long (`lose_answer`)
    applied_at: float | None = None  # when the call took effect (late for `land_late`)


@dataclass
class FakeMessage:
    message_id: str
    chat_id: str
    text: str
    history: list[str] = field(default_factory=list)
    deleted: bool = False

    @property
    def edits(self) -> int:
        return len(self.history) - 1


@dataclass
class Failure:
    """A scripted answer for the next matching call: an HTTP status and body, or a stall."""

    status: int = 500
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering (longer than the client's timeout = a timeout)
    apply: bool = False  # the call still takes effect (a send that landed but whose answer was lost)
    answer_after_s: float = 0.0  # apply at once, answer only after this long (the answer is lost)
    lands_after: asyncio.Event | None = None  # with `apply`: after `delay_s`, also wait for this before applying


def too_many_requests(body: dict[str, Any], retry_after: float) -> Response:
    """A 429 whose `Retry-After` header is whole seconds, rounded up (at least 1)."""
    return JSONResponse(body, 429, {"Retry-After": str(max(1, math.ceil(retry_after)))})


class FakePlatform(StartStop):
    name = "fake"
    rate_limit_body: ClassVar[dict[str, Any]] = {}  # the body of the platform's 429

    def __init__(self, *, per_chat_interval: float | None = None, retry_after: float = 1.0) -> None:
        self.per_chat_interval = per_chat_interval
        self.retry_after = retry_after
        self.calls: list[Call] = []
        self.chats: dict[str, list[FakeMessage]] = defaultdict(list)
        self._failures: list[tuple[str, str | None, Failure]] = []
        self._last_call: dict[str, float] = {}
        self._throttled: dict[str, float] = {}  # chat → until when every call gets a 429
        self._applied: dict[tuple[str, str], int] = defaultdict(int)  # (method, chat) → calls applied
        self._apply_waiters: list[tuple[str, str, int, asyncio.Event]] = []
        self._ids = 0
        self.app = FastAPI()
        self.app.add_exception_handler(ClientDisconnect, _client_gone)
        self.routes(self.app)
        self.port = 0
        self._http = LoopbackServer(self.app, f"fake-{self.name}")

    # -- to override -------------------------------------------------------------------
    def routes(self, app: FastAPI) -> None:
        raise NotImplementedError

    def rate_limited(self, retry_after: float) -> Response:
        """The platform's 429: `rate_limit_body` with a `Retry-After` header, unless the platform spells it otherwise."""
        return too_many_requests(self.rate_limit_body, retry_after)

    # -- test API --------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, method: str, failure: Failure, *, chat_id: str | None = None, count: int = 1) -> None:
        self._failures.extend((method, chat_id, failure) for _ in range(count))

    def throttle(self, chat_id: str, retry_after: float) -> None:
        """Every call to this chat is answered 429 until `retry_after` s from now (the answer says what is left)."""
        self._throttled[chat_id] = time.monotonic() + retry_after

    def land_late(self, method: str, hold_s: float, *, chat_id: str | None = None, count: int = 1) -> None:
        """Late landing: no answer for `hold_s` (longer than the client's timeout), then the call takes effect."""
        self.fail_next(
            method, Failure(200, {"ok": True, "result": True}, delay_s=hold_s, apply=True), chat_id=chat_id, count=count
        )

    def land_after(self, method: str, chat_id: str, *, applied: int, hold_s: float = 0.0) -> None:
        """Late landing ordered by events, not by time: the next `method` call to `chat_id` gets no answer
        and takes effect only once `applied` calls of `method` to that chat have taken effect (its own
        not counted) — the stalled send lands right after the one the test names, on any machine load."""
        event = asyncio.Event()
        self._apply_waiters.append((method, chat_id, applied, event))
        failure = Failure(200, {"ok": True, "result": True}, delay_s=hold_s, apply=True, lands_after=event)
        self.fail_next(method, failure, chat_id=chat_id)

    def note_applied(self, method: str, chat_id: str) -> None:
        """A route calls this when a call took effect: it releases the late landings waiting for it."""
        self._applied[method, chat_id] += 1
        for m, chat, n, event in self._apply_waiters:
            if (m, chat) == (method, chat_id) and self._applied[method, chat_id] >= n:
                event.set()

    def lose_answer(self, method: str, hold_s: float, *, chat_id: str | None = None, count: int = 1) -> None:
        """The call takes effect at once; its answer comes only after `hold_s` (the client has given up)."""
        self.fail_next(method, Failure(apply=True, answer_after_s=hold_s), chat_id=chat_id, count=count)

    def messages(self, chat_id: str) -> list[FakeMessage]:
        return [m for m in self.chats.get(chat_id, []) if not m.deleted]

    def texts(self, chat_id: str) -> list[str]:
        return [m.text for m in self.messages(chat_id)]

    def calls_to(self, chat_id: str, *methods: str) -> list[Call]:
        return [c for c in self.calls if c.chat_id == chat_id and (not methods or c.method in methods)]

    def count(self, status: int | None = None) -> int:
        return sum(1 for c in self.calls if status is None or c.status == status)

    # -- helpers for routes --------------------------------------------------------------
    async def admit(self, method: str, chat_id: str, body: dict[str, Any]) -> tuple[Call, Response | None, bool]:
        """Record the call; returns (call, a response to answer instead, whether to apply it anyway)."""
        call = Call(method, chat_id, body)
        self.calls.append(call)
        until = self._throttled.get(chat_id)
        if until is not None and (left := until - call.at) > 0:
            call.status = 429
            return call, self.rate_limited(round(max(left, 0.1), 1)), False
        for i, (m, chat, failure) in enumerate(self._failures):
            if m == method and chat in (None, chat_id):
                del self._failures[i]
                if failure.answer_after_s:  # applied normally, the answer held back
                    call.answer_after_s = failure.answer_after_s
                    return call, None, False
                if failure.delay_s:
                    await asyncio.sleep(failure.delay_s)
                if failure.lands_after is not None:
                    await failure.lands_after.wait()
                call.status = failure.status
                return call, JSONResponse(failure.body or {}, failure.status, failure.headers), failure.apply
        if self.per_chat_interval is not None:
            last = self._last_call.get(chat_id)
            if last is not None and call.at - last < self.per_chat_interval - RATE_TOLERANCE_S:
                call.status = 429
                return call, self.rate_limited(self.retry_after), False
            self._last_call[chat_id] = call.at
        return call, None, False

    async def answer(self, call: Call, response: Response) -> Response:
        """The response of an applied call, held back when the call's answer is to be lost."""
        call.applied_at = time.monotonic()
        if call.answer_after_s:
            await asyncio.sleep(call.answer_after_s)
        return response

    def post(self, chat_id: str, text: str) -> FakeMessage:
        self._ids += 1
        msg = FakeMessage(str(self._ids), chat_id, text, [text])
        self.chats[chat_id].append(msg)
        return msg

    def find(self, chat_id: str, message_id: str) -> FakeMessage | None:
        return next((m for m in self.chats.get(chat_id, []) if m.message_id == message_id and not m.deleted), None)

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self.port = await self._http.start(self.port)  # a restarted fake listens where it did

    async def stop(self) -> None:
        for *_, event in self._apply_waiters:  # a landing still waiting would hold the server's shutdown
            event.set()
        await self._http.stop()


async def _client_gone(_request: Request, _exc: Exception) -> Response:
    """A client that gave up before its body arrived (its timeout): as on the real platform, the
    call was never made; nothing to answer and nothing to log."""
    return Response(status_code=499)
