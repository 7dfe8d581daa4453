"""Slack Web API: chat.postMessage / chat.update (4,000 characters, Retry-After header, mrkdwn text)."""

from __future__ import annotations

from typing import Any

from agentstream.config import TextFormat
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import (
    AdapterError,
    BadFormat,
    Capabilities,
    Forbidden,
    NotFound,
    TooLong,
    Transient,
)
from agentstream_delivery.adapters.http import BotTokenHttpAdapter, by_status, raise_if_rate_limited

DEFAULT_API_URL = "https://slack.com/api"
CAPABILITIES = Capabilities(max_length=4000, chat_interval=1.0, formatting=TextFormat.SLACK_MRKDWN)
_ERRORS: dict[str, type[AdapterError]] = {
    "msg_too_long": TooLong,
    "message_not_found": NotFound,
    "channel_not_found": NotFound,
    "not_in_channel": Forbidden,
    "is_archived": Forbidden,
    "invalid_auth": Forbidden,
    "not_authed": Forbidden,
    "account_inactive": Forbidden,
    "cant_update_message": Forbidden,
    "internal_error": Transient,
    "fatal_error": Transient,
    "service_unavailable": Transient,
}


class SlackAdapter(BotTokenHttpAdapter):
    platform = KnownPlatform.SLACK
    capabilities = CAPABILITIES
    default_api_url = DEFAULT_API_URL

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        body: dict[str, Any] = {"channel": target.chat_id, "text": _encoded(text, markup), **_mrkdwn(markup)}
        if target.thread_id:
            body["thread_ts"] = target.thread_id
        return str((await self._call("chat.postMessage", body))["ts"])

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        body = {"channel": target.chat_id, "ts": message_id, "text": _encoded(text, markup), **_mrkdwn(markup)}
        await self._call("chat.update", body)

    async def _call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self.request("POST", f"{self.api_url}/{method}", json=body)
        raise_if_rate_limited(resp, "slack: ratelimited")
        try:
            data: dict[str, Any] = resp.json()
        except ValueError:
            raise by_status(resp.status_code, f"slack: HTTP {resp.status_code}") from None
        if resp.status_code == 200 and data.get("ok"):
            return data
        code = str(data.get("error") or f"HTTP {resp.status_code}")
        raise _ERRORS.get(code, BadFormat if resp.status_code < 500 else Transient)(f"slack: {code}")


def _encoded(text: str, markup: TextFormat) -> str:
    """Slack reads `& < >` as control characters in any text: plain text has them escaped (no `<!channel>`)."""
    if markup is TextFormat.SLACK_MRKDWN:
        return text  # the renderer escaped the model's text already
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _mrkdwn(markup: TextFormat) -> dict[str, bool]:
    """Text not written in mrkdwn is sent with Slack's markup parsing off."""
    return {"mrkdwn": markup is TextFormat.SLACK_MRKDWN}
