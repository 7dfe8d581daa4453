"""A fake Discord REST API (v10): create and edit channel messages.

`POST /channels/{channel_id}/messages {content}` → `{"id", "channel_id", "content"}`;
`PATCH /channels/{channel_id}/messages/{message_id} {content}` → the message. Auth
header `Bot <token>`. Errors: `{"code", "message"}` — 404 `10008 Unknown Message`, 400
`50035 Invalid Form Body` (content over 2,000 characters, a nonce over 25), 401; a rate limit is
HTTP 429 with `{"message": "You are being rate limited.", "retry_after": <float
seconds>, "global": false}`. `GET /users/@me` → the bot user (what `agentstream doctor` asks).
A create with `nonce` and `enforce_nonce: true` whose nonce a create of the same bot used in the
past few minutes (`nonce_window_s`) creates nothing and answers 200 with that message as it is now.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentstream_testing.fake_platforms.base import FakeMessage, FakePlatform

MAX_CHARS = 2000
MAX_NONCE_CHARS = 25
NONCE_WINDOW_S = 300.0  # Discord: "the past few minutes"


class FakeDiscord(FakePlatform):
    name = "discord"

    def __init__(self, token: str = "discord-test", *, nonce_window_s: float = NONCE_WINDOW_S, **kw: Any) -> None:
        self.token = token
        self.nonce_window_s = nonce_window_s
        self._nonces: dict[str, tuple[FakeMessage, float]] = {}  # nonce → the message it created, when
        super().__init__(**kw)

    def rate_limited(self, retry_after: float) -> Response:
        body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
        return JSONResponse(body, 429)  # Discord says how long in the body, in fractional seconds

    def routes(self, app: FastAPI) -> None:
        @app.get("/users/@me")
        async def me(request: Request) -> Response:
            if request.headers.get("authorization") != f"Bot {self.token}":
                return JSONResponse({"code": 0, "message": "401: Unauthorized"}, 401)
            return JSONResponse({"id": "1", "username": "fake-bot", "bot": True})

        @app.post("/channels/{channel_id}/messages")
        async def create(channel_id: str, request: Request) -> Response:
            return await self._handle("create", channel_id, None, request)

        @app.patch("/channels/{channel_id}/messages/{message_id}")
        async def edit(channel_id: str, message_id: str, request: Request) -> Response:
            return await self._handle("edit", channel_id, message_id, request)

    async def _handle(self, method: str, channel_id: str, message_id: str | None, request: Request) -> Response:
        body: dict[str, Any] = dict(await request.json())
        call, answer, apply = await self.admit(method, channel_id, body)
        if request.headers.get("authorization") != f"Bot {self.token}":
            call.status = 401
            return JSONResponse({"code": 0, "message": "401: Unauthorized"}, 401)
        if answer is not None and not apply:
            return answer
        content = str(body.get("content", ""))
        nonce = str(body.get("nonce", ""))
        if len(content) > MAX_CHARS or not content or len(nonce) > MAX_NONCE_CHARS:
            call.status = 400
            return JSONResponse(
                {
                    "code": 50035,
                    "message": "Invalid Form Body",
                    "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
                },
                400,
            )
        if message_id is None:
            existing = self._nonces.get(nonce) if nonce and body.get("enforce_nonce") is True else None
            if existing is not None and time.monotonic() - existing[1] < self.nonce_window_s:
                msg = existing[0]  # the same nonce again: nothing is created
            else:
                msg = self.post(channel_id, content)
                if nonce:
                    self._nonces[nonce] = (msg, time.monotonic())
            call.message_id = msg.message_id
        else:
            found = self.find(channel_id, message_id)
            if found is None:
                call.status = 404
                return JSONResponse({"code": 10008, "message": "Unknown Message"}, 404)
            found.text = content
            found.history.append(content)
            msg = found
        return await self.answer(
            call, answer or JSONResponse({"id": msg.message_id, "channel_id": channel_id, "content": msg.text})
        )
