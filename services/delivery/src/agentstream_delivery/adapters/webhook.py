"""A generic outgoing webhook: the final text of each message POSTed as JSON, signed with HMAC-SHA256.

The signature header is `X-Agentstream-Signature: sha256=<hex HMAC of the raw body>`
under the secret named by `platforms.webhook.secret_env`, so the receiver can check
the body came from us and was not altered.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Any

from agentstream.config import TextFormat, ToolProgress
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.adapters.http import SendOnlyHttpAdapter, by_status, raise_if_rate_limited

SIGNATURE_HEADER = "X-Agentstream-Signature"
# The receiver gets the model's Markdown as written: it knows best how to show it.
CAPABILITIES = Capabilities(
    max_length=100_000, measure="chars", can_edit=False, tool_progress=ToolProgress.OFF, formatting=TextFormat.MARKDOWN
)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookAdapter(SendOnlyHttpAdapter):
    platform = KnownPlatform.WEBHOOK
    capabilities = CAPABILITIES

    def __init__(self, secret: str, api_url: str, **kw: Any) -> None:
        super().__init__(api_url, bot="webhook", **kw)
        self.secret = secret

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        body = json.dumps(
            {"platform": target.platform, "chat_id": target.chat_id, "thread_id": target.thread_id, "text": text}
        ).encode()
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(self.secret, body)}
        resp = await self.request("POST", self.api_url, content=body, headers=headers)
        raise_if_rate_limited(resp, "webhook: rate limited")
        if resp.status_code >= 300:
            raise by_status(resp.status_code, f"webhook: HTTP {resp.status_code}")
        try:
            return str(resp.json().get("id") or uuid.uuid4())
        except ValueError:
            return str(uuid.uuid4())
