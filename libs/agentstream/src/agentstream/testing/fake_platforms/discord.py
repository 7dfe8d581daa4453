"""A fake Discord REST API (v10): create and edit channel messages.

`POST /channels/{channel_id}/messages {content}` → `{"id", "channel_id", "content"}`;
`PATCH /channels/{channel_id}/messages/{message_id} {content}` → the message. Auth
header `Bot <token>`. Errors: `{"code", "message"}` — 404 `10008 Unknown Message`, 400
`50035 Invalid Form Body` (content longer than 2,000 characters), 401; a rate limit is
HTTP 429 with `{"message": "You are being rate limited.", "retry_after": <float
seconds>, "global": false}`. `GET /users/@me` → the bot user (what `agentstream doctor` asks).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentstream.testing.fake_platforms.base import FakePlatform

MAX_CHARS = 2000


class FakeDiscord(FakePlatform):
    name = "discord"

    def __init__(self, token: str = "discord-test", **kw: Any) -> None:
        self.token = token
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
        if len(content) > MAX_CHARS or not content:
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
            msg = self.post(channel_id, content)
            call.message_id = msg.message_id
        else:
            found = self.find(channel_id, message_id)
            if found is None:
                call.status = 404
                return JSONResponse({"code": 10008, "message": "Unknown Message"}, 404)
            found.text = content
            found.history.append(content)
            msg = found
        return answer or JSONResponse({"id": msg.message_id, "channel_id": channel_id, "content": msg.text})
