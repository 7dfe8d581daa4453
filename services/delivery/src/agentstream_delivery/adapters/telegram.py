"""Telegram Bot API: sendMessage / editMessageText / deleteMessage, drafts in private chats.

A `sendMessage` whose answer never came may have posted a message: `shows` probes an id for it
(an edit to its exact text is "not modified") and `delete` removes it.

Length is counted in UTF-16 code units (4,096 per message). A 429 carries
`parameters.retry_after`; "message is not modified" means the platform already shows
the text, which is success. Formatted text goes as `parse_mode: HTML`; the Bot API
refuses HTML it cannot parse ("can't parse entities"), which is `FormattingRejected`.
`sendMessageDraft` streams previews of a private chat
(positive chat id) into one draft; the final text is a real message.
"""

from __future__ import annotations

from typing import Any

from agentstream.config import TextFormat
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import (
    AdapterError,
    BadFormat,
    Capabilities,
    FormattingRejected,
    NotFound,
    Probe,
    RateLimited,
    TooLong,
)
from agentstream_delivery.adapters.http import HttpAdapter, by_status

DEFAULT_API_URL = "https://api.telegram.org"
CAPABILITIES = Capabilities(
    max_length=4096, measure="utf16", draft_streaming=True, chat_interval=1.0, formatting=TextFormat.TELEGRAM_HTML
)


class TelegramAdapter(HttpAdapter):
    platform = KnownPlatform.TELEGRAM
    capabilities = CAPABILITIES

    def __init__(self, token: str, api_url: str = DEFAULT_API_URL, **kw: Any) -> None:
        super().__init__(api_url, bot=token.split(":", 1)[0], **kw)
        self._base = f"{self.api_url}/bot{token}"

    @property
    def endpoint(self) -> str:
        return self._base  # the token is in the path, as the Bot API wants it

    def supports_drafts(self, target: ReplyTarget) -> bool:
        return self.capabilities.draft_streaming and target.chat_id.isdigit() and int(target.chat_id) > 0

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        body: dict[str, Any] = {"chat_id": target.chat_id, "text": text, **_parse_mode(markup)}
        if target.thread_id:
            body["message_thread_id"] = int(target.thread_id) if target.thread_id.isdigit() else target.thread_id
        if target.reply_to_id:
            reply_to = int(target.reply_to_id) if target.reply_to_id.isdigit() else target.reply_to_id
            body["reply_parameters"] = {"message_id": reply_to, "allow_sending_without_reply": True}
        result = await self._call("sendMessage", body)
        return str(result["message_id"])

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        try:
            body = {"chat_id": target.chat_id, "message_id": message_id, "text": text, **_parse_mode(markup)}
            await self._call("editMessageText", body)
        except BadFormat as err:
            if "message is not modified" not in str(err):
                raise  # otherwise: the platform already shows exactly this text

    async def shows(self, target: ReplyTarget, message_id: str, text: str, *, markup: TextFormat) -> Probe:
        """The probe for an orphan: an edit to the exact text is refused as "message is not modified"
        by the message that shows it, and only by it (docs/delivery.md, "Orphan stubs")."""
        body = {"chat_id": target.chat_id, "message_id": message_id, "text": text, **_parse_mode(markup)}
        try:
            await self._call("editMessageText", body)
        except NotFound:
            return Probe.ABSENT
        except BadFormat as err:
            # "message can't be edited": another sender's message
            return Probe.SHOWS if "message is not modified" in str(err) else Probe.ABSENT
        return Probe.CHANGED

    def shares_ids(self, chat_id: str, other_chat_id: str) -> bool:
        return _sequence(chat_id) == _sequence(other_chat_id)

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        await self._call("deleteMessage", {"chat_id": target.chat_id, "message_id": message_id})

    async def send_draft(
        self, target: ReplyTarget, draft_id: int, text: str, *, markup: TextFormat = TextFormat.PLAIN
    ) -> None:
        body = {"chat_id": target.chat_id, "draft_id": draft_id, "text": text, **_parse_mode(markup)}
        await self._call("sendMessageDraft", body)

    async def _call(self, method: str, body: dict[str, Any]) -> Any:
        resp = await self.request("POST", f"{self._base}/{method}", json=body)
        try:
            data = resp.json()
        except ValueError:
            data = {}
        if resp.status_code == 200 and data.get("ok"):
            return data.get("result")
        raise classify(resp.status_code, data)


def _sequence(chat_id: str) -> str:
    """Where a chat's message ids come from: a supergroup or channel (`-100…`) numbers its own; a
    bot's private chats and basic groups share one sequence, the bot's."""
    return chat_id if chat_id.startswith("-100") else ""


def _parse_mode(markup: TextFormat) -> dict[str, str]:
    return {"parse_mode": "HTML"} if markup is TextFormat.TELEGRAM_HTML else {}


def classify(status: int, data: dict[str, Any]) -> AdapterError:
    description = str(data.get("description") or f"HTTP {status}")
    code = int(data.get("error_code") or status)
    if code == 429:
        return RateLimited(float((data.get("parameters") or {}).get("retry_after", 1)), description)
    lowered = description.lower()
    if "can't parse entities" in lowered:
        return FormattingRejected(description)
    if "too long" in lowered:
        return TooLong(description)
    if "not found" in lowered and code == 400:
        return NotFound(description)
    return by_status(code, description)
