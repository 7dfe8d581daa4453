"""A fake receiver of agentstream's generic outgoing webhook: `POST /hook`.

Body `{"platform", "chat_id", "thread_id", "root_run_id", "segment", "text"}`; header
`X-Agentstream-Signature: sha256=<hex HMAC-SHA256 of the raw body>`. The receiver
verifies the signature with its `secret` and answers 200 `{"id"}`, or 401
`{"error": "bad signature"}` (the call is recorded either way, with `valid`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentstream_testing.fake_platforms.base import FakePlatform

SIGNATURE_HEADER = "X-Agentstream-Signature"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class FakeWebhookReceiver(FakePlatform):
    name = "webhook"
    rate_limit_body: ClassVar[dict[str, Any]] = {"error": "slow down"}

    def __init__(self, secret: str = "webhook-secret", **kw: Any) -> None:
        self.secret = secret
        super().__init__(**kw)

    def routes(self, app: FastAPI) -> None:
        @app.post("/hook")
        async def hook(request: Request) -> Response:
            raw = await request.body()
            body: dict[str, Any] = json.loads(raw)
            chat = str(body.get("chat_id", ""))
            call, answer, apply = await self.admit("post", chat, body)
            valid = hmac.compare_digest(request.headers.get(SIGNATURE_HEADER, ""), signature(self.secret, raw))
            call.body = {**body, "valid": valid}
            if not valid:
                call.status = 401
                return JSONResponse({"error": "bad signature"}, 401)
            if answer is not None and not apply:
                return answer
            msg = self.post(chat, str(body.get("text", "")))
            call.message_id = msg.message_id
            return answer or JSONResponse({"id": msg.message_id})
