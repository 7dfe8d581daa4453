"""Discord REST API: create and edit channel messages (2,000 characters, 429 JSON retry_after).

A create carries a `nonce` derived from the deliverer's `SEND_KEY` with `enforce_nonce`: Discord
then answers a repeated create (after a timeout, whose first attempt may have posted) with the
message the first one created, instead of a second message. That message may show an older text
(a preview's send timed out, the segment's next text is sent): it is edited to the new text.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agentstream.config import TextFormat
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import SEND_KEY, Capabilities, NotFound, RateLimited, TooLong
from agentstream_delivery.adapters.http import BotTokenHttpAdapter, by_status

DEFAULT_API_URL = "https://discord.com/api/v10"
CAPABILITIES = Capabilities(
    max_length=2000, buffer_threshold=200, chat_interval=1.0, formatting=TextFormat.DISCORD_MARKDOWN
)
NONCE_CHARS = 25  # Discord's limit for a string nonce
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
        body: dict[str, Any] = {"content": text}
        if (key := SEND_KEY.get()) is not None:
            body |= {"nonce": nonce(key), "enforce_nonce": True}
        data = await self._call("POST", f"/channels/{channel}/messages", body)
        message_id = str(data["id"])
        if data.get("content", text) != text:  # the message an earlier attempt created, with its text
            await self.edit(target, message_id, text, final=final, markup=markup)
        return message_id

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


def nonce(key: str) -> str:
    """The create's nonce: the same for every attempt at one message, within Discord's 25 characters."""
    return hashlib.sha256(key.encode()).hexdigest()[:NONCE_CHARS]
