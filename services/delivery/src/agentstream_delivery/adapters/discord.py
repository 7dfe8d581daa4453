"""Discord REST API: create and edit channel messages (2,000 characters, 429 JSON retry_after)."""

from __future__ import annotations

from typing import Any

from agentstream.config import TextFormat
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import Capabilities, NotFound, RateLimited, TooLong
from agentstream_delivery.adapters.http import BotTokenHttpAdapter, by_status

DEFAULT_API_URL = "https://discord.com/api/v10"
CAPABILITIES = Capabilities(
    max_length=2000, buffer_threshold=200, chat_interval=1.0, formatting=TextFormat.DISCORD_MARKDOWN
)
UNKNOWN_MESSAGE = 10008
INVALID_FORM_BODY = 50035


class DiscordAdapter(BotTokenHttpAdapter):
    platform = KnownPlatform.DISCORD
    capabilities = CAPABILITIES
    auth_scheme = "Bot"
    default_api_url = DEFAULT_API_URL

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        channel = target.thread_id or target.chat_id  # a Discord thread is a channel of its own
        data = await self._call("POST", f"/channels/{channel}/messages", {"content": text})
        return str(data["id"])

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        channel = target.thread_id or target.chat_id
        await self._call("PATCH", f"/channels/{channel}/messages/{message_id}", {"content": text})

    async def _call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self.request(method, self.api_url + path, json=body)
        try:
            data: dict[str, Any] = resp.json()
        except ValueError:
            data = {}
        if resp.status_code in (200, 201):
            return data
        message = f"discord: {data.get('message') or resp.status_code}"
        if resp.status_code == 429:
            raise RateLimited(float(data.get("retry_after", 1.0)), message)
        if data.get("code") == UNKNOWN_MESSAGE:
            raise NotFound(message)
        if data.get("code") == INVALID_FORM_BODY and "MAX_LENGTH" in str(data.get("errors")):
            raise TooLong(message)
        raise by_status(resp.status_code, message)
