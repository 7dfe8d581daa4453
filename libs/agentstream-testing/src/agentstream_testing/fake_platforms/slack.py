"""A fake Slack Web API: `POST /chat.postMessage` and `POST /chat.update` (JSON, Bearer token).

`chat.postMessage {channel, text, thread_ts?}` → `{"ok": true, "channel", "ts",
"message": {"text"}}`; `chat.update {channel, ts, text}` → `{"ok": true, "channel",
"ts", "text"}`. Errors are HTTP 200 with `{"ok": false, "error": "<code>"}`
(`msg_too_long` past 4,000 characters, `message_not_found`, `channel_not_found`,
`invalid_auth`); a rate limit is HTTP 429 with a `Retry-After` header (whole seconds)
and `{"ok": false, "error": "ratelimited"}`. `auth.test` → `{"ok": true, "user", "team", "user_id"}` (what
`agentstream doctor` asks).
"""

from __future__ import annotations

from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentstream_testing.fake_platforms.base import FakePlatform

MAX_CHARS = 4000


class FakeSlack(FakePlatform):
    name = "slack"
    rate_limit_body: ClassVar[dict[str, Any]] = {"ok": False, "error": "ratelimited"}

    def __init__(self, token: str = "xoxb-test", **kw: Any) -> None:
        self.token = token
        super().__init__(**kw)

    def routes(self, app: FastAPI) -> None:
        @app.post("/auth.test")
        async def auth_test(request: Request) -> Response:
            if request.headers.get("authorization") != f"Bearer {self.token}":
                return JSONResponse({"ok": False, "error": "invalid_auth"})
            return JSONResponse({"ok": True, "user": "fake-bot", "team": "fake-team", "user_id": "UFAKE"})

        @app.post("/{method}")
        async def api(method: str, request: Request) -> Response:
            body: dict[str, Any] = dict(await request.json())
            channel = str(body.get("channel", ""))
            call, answer, apply = await self.admit(method, channel, body)
            if request.headers.get("authorization") != f"Bearer {self.token}":
                return JSONResponse({"ok": False, "error": "invalid_auth"})
            if answer is not None and not apply:
                return answer
            result = self._apply(method, channel, body)
            if method == "chat.postMessage" and result.get("ok"):
                call.message_id = str(result["ts"])
            return answer or JSONResponse(result)

    def _apply(self, method: str, channel: str, body: dict[str, Any]) -> dict[str, Any]:
        text = str(body.get("text", ""))
        if len(text) > MAX_CHARS:
            return {"ok": False, "error": "msg_too_long"}
        if not text:
            return {"ok": False, "error": "no_text"}
        match method:
            case "chat.postMessage":
                msg = self.post(channel, text)
                msg.message_id = f"1700000000.{int(msg.message_id):06d}"
                return {"ok": True, "channel": channel, "ts": msg.message_id, "message": {"text": text}}
            case "chat.update":
                found = self.find(channel, str(body.get("ts")))
                if found is None:
                    return {"ok": False, "error": "message_not_found"}
                found.text = text
                found.history.append(text)
                return {"ok": True, "channel": channel, "ts": found.message_id, "text": text}
        return {"ok": False, "error": "unknown_method"}
