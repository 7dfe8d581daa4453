"""A fake Telegram Bot API: `POST /bot<token>/<method>` with JSON bodies.

Methods: `sendMessage {chat_id, text, message_thread_id?}` → `{"ok": true, "result":
{"message_id", "chat": {"id"}, "text"}}`; `editMessageText {chat_id, message_id, text}`;
`deleteMessage {chat_id, message_id}` → `{"ok": true, "result": true}`;
`sendMessageDraft {chat_id, draft_id, text}` (private chats only, i.e. positive chat
ids) → `{"ok": true, "result": true}`. Errors are `{"ok": false, "error_code",
"description"}`; a rate limit is HTTP 429 with `parameters.retry_after` (seconds); an
edit to the same text is 400 "Bad Request: message is not modified…"; text longer than
4096 UTF-16 code units is 400 "Bad Request: message is too long"; a wrong token is 401.
With `parse_mode: "HTML"` the text must be HTML the Bot API accepts (`telegram_html`),
else 400 "Bad Request: can't parse entities: …"; its length and emptiness are those of
the text after parsing. Messages keep the text as sent (the HTML, for formatted ones).
`getMe` → `{"ok": true, "result": {"id", "is_bot", "username"}}` (what `agentstream doctor` asks).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentstream_testing.fake_platforms.base import FakePlatform
from agentstream_testing.fake_platforms.telegram_html import TAGS, HtmlRejected, parse

MAX_UTF16 = 4096
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are "
    "exactly the same as a current content and reply markup of the message"
)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def error(status: int, description: str, **parameters: Any) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return JSONResponse(body, status)


class FakeTelegram(FakePlatform):
    name = "telegram"

    def __init__(
        self, token: str = "123:TEST", *, drafts: bool = True, html_tags: frozenset[str] = TAGS, **kw: Any
    ) -> None:
        self.token = token
        self.drafts_enabled = drafts
        self.html_tags = html_tags  # fewer: a Bot API that predates some tags (refuses them like unknown ones)
        self.drafts: dict[tuple[str, int], list[str]] = {}  # (chat, draft id) → every frame shown
        super().__init__(**kw)

    def rate_limited(self, retry_after: float) -> Response:
        return error(429, f"Too Many Requests: retry after {retry_after:g}", retry_after=retry_after)

    def routes(self, app: FastAPI) -> None:
        @app.post("/bot{token}/getMe")
        async def get_me(token: str) -> Response:
            if token != self.token:
                return error(401, "Unauthorized")
            bot_id = int(self.token.split(":", 1)[0])
            return JSONResponse({"ok": True, "result": {"id": bot_id, "is_bot": True, "username": "fake_bot"}})

        @app.post("/bot{token}/{method}")
        async def api(token: str, method: str, request: Request) -> Response:
            body: dict[str, Any] = dict(await request.json())
            chat_id = str(body.get("chat_id", ""))
            call, answer, apply = await self.admit(method, chat_id, body)
            if token != self.token:
                call.status = 401
                return error(401, "Unauthorized")
            if answer is not None and not apply:
                return answer
            result = self._apply(method, chat_id, body)
            call.status = result.status_code
            if call.status == 200 and method == "sendMessage":
                call.message_id = str(self.chats[chat_id][-1].message_id)
            if call.status == 200:
                self.note_applied(method, chat_id)
            return await self.answer(call, answer or result)

    def _apply(self, method: str, chat_id: str, body: dict[str, Any]) -> JSONResponse:
        text = str(body.get("text", ""))
        if method in ("sendMessage", "editMessageText", "sendMessageDraft"):
            shown = text
            if body.get("parse_mode") == "HTML":
                try:
                    shown = parse(text, self.html_tags)
                except HtmlRejected as err:
                    return error(400, f"Bad Request: can't parse entities: {err}")
            elif body.get("parse_mode") is not None:
                return error(400, f"Bad Request: unsupported parse_mode {body.get('parse_mode')!r}")
            if not shown.strip():
                return error(400, "Bad Request: message text is empty")
            if _utf16(shown) > MAX_UTF16:
                return error(400, "Bad Request: message is too long")
        match method:
            case "sendMessage":
                msg = self.post(chat_id, text)
                return JSONResponse(
                    {"ok": True, "result": {"message_id": int(msg.message_id), "chat": {"id": chat_id}, "text": text}}
                )
            case "editMessageText":
                found = self.find(chat_id, str(body.get("message_id")))
                if found is None:
                    return error(400, "Bad Request: message to edit not found")
                if found.text == text:
                    return error(400, NOT_MODIFIED)
                found.text = text
                found.history.append(text)
                return JSONResponse({"ok": True, "result": {"message_id": int(found.message_id), "text": text}})
            case "deleteMessage":
                found = self.find(chat_id, str(body.get("message_id")))
                if found is None:
                    return error(400, "Bad Request: message to delete not found")
                found.deleted = True
                return JSONResponse({"ok": True, "result": True})
            case "sendMessageDraft":
                if not self.drafts_enabled:
                    return error(404, "Not Found")
                if not chat_id.lstrip("-").isdigit() or int(chat_id) <= 0:
                    return error(400, "Bad Request: drafts can be sent only to private chats")
                self.drafts.setdefault((chat_id, int(body.get("draft_id", 0))), []).append(text)
                return JSONResponse({"ok": True, "result": True})
        return error(404, "Not Found")
