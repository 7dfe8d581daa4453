"""Signal through a signal-cli REST endpoint: messages cannot be edited, so only final texts go out."""

from __future__ import annotations

from typing import Any

from agentstream.config import TextFormat, ToolProgress
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.adapters.http import SendOnlyHttpAdapter, by_status, raise_if_rate_limited

DEFAULT_API_URL = "http://127.0.0.1:8080"
CAPABILITIES = Capabilities(
    max_length=2000,
    measure="utf16",
    can_edit=False,
    tool_progress=ToolProgress.OFF,
    chat_interval=0.5,
    formatting=TextFormat.PLAIN,
)


class SignalAdapter(SendOnlyHttpAdapter):
    platform = KnownPlatform.SIGNAL
    capabilities = CAPABILITIES

    def __init__(self, number: str, api_url: str = DEFAULT_API_URL, **kw: Any) -> None:
        super().__init__(api_url, bot=number, **kw)
        self.number = number

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        body = {"message": text, "number": self.number, "recipients": [target.chat_id]}
        resp = await self.request("POST", f"{self.api_url}/v2/send", json=body)
        raise_if_rate_limited(resp, "signal: rate limit")
        if resp.status_code not in (200, 201):
            raise by_status(resp.status_code, f"signal: {resp.text[:200]}")
        return str(resp.json().get("timestamp", ""))
