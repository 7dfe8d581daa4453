"""A fake signal-cli REST API: `POST /v2/send`.

Body `{"message", "number" (the sending account), "recipients": [..]}` → 201
`{"timestamp": "<ms>"}`. Signal messages cannot be edited here: every call is a new
message. Errors: 400 `{"error": "..."}`; a rate limit is 429 `{"error": "rate limit"}`
with `Retry-After`. `GET /v1/accounts` → the registered numbers (what `agentstream doctor` asks).
"""

from __future__ import annotations

from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentstream_testing.fake_platforms.base import FakePlatform


class FakeSignal(FakePlatform):
    name = "signal"
    rate_limit_body: ClassVar[dict[str, Any]] = {"error": "rate limit"}

    def __init__(self, number: str = "+15550000000", **kw: Any) -> None:
        self.number = number
        super().__init__(**kw)

    def routes(self, app: FastAPI) -> None:
        @app.get("/v1/accounts")
        async def accounts() -> Response:
            return JSONResponse([self.number])

        @app.post("/v2/send")
        async def send(request: Request) -> Response:
            body: dict[str, Any] = dict(await request.json())
            recipients = body.get("recipients") or []
            chat = str(recipients[0]) if recipients else ""
            call, answer, apply = await self.admit("send", chat, body)
            if body.get("number") != self.number:
                call.status = 400
                return JSONResponse({"error": "User is not registered"}, 400)
            if answer is not None and not apply:
                return answer
            msg = self.post(chat, str(body.get("message", "")))
            call.status, call.message_id = 201, msg.message_id
            return answer or JSONResponse({"timestamp": str(1_700_000_000_000 + int(msg.message_id))}, 201)
