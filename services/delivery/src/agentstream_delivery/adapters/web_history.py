"""A web chat's history for the page, both sides, read from persistence's read API.

`GET /v1/conversations/{key}/runs` says which runs are the session's tenant's and how each
ended; `GET /v1/conversations/{key}/messages` gives their messages in order. The page gets
the user's messages, the assistant's texts, and the ending's words of each run that did not
complete (`render.Ending`), each tagged with its root run id so live frames of the same run
replace what history showed of it. An answer is rendered as its live final frame was: the same
renderer (`formatting.render_frame`, the web's HTML), the ending's marker appended to the run's
last answer as the stream machine appends it, so a reload shows what the live view showed. Delivery reads with its own key (`platforms.web.history_key_env`,
scope `conversations:read`); the session decides the chat and the tenant.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from fastapi import HTTPException
from pydantic import BaseModel

from agentstream.config import TextFormat
from agentstream.contracts import FinishReason, KnownPlatform, MessageRole, RunStatus, WebEnding, conversation_key
from agentstream_delivery.adapters.web_endings import ending_of, visible_text
from agentstream_delivery.formatting import render_frame
from agentstream_delivery.render import DEFAULT_TEXTS, FixedTexts

KEEP_ITEMS = 200  # the page shows the conversation's last items
PAGE_SIZE = 1000
MAX_PAGES = 20  # per list: a conversation longer than 20,000 messages shows its first 20,000's tail


class HistoryItem(BaseModel):
    role: MessageRole
    text: str
    markup: TextFormat = TextFormat.PLAIN  # as a frame's: `html` (an answer) or `plain` (what the user typed)
    run_id: str
    ending: WebEnding | None = None
    # The history session the message belongs to (`/new` starts one): the page lists the chat's conversations by it.
    session_id: str | None = None


class History(BaseModel):
    items: list[HistoryItem]


@dataclass(frozen=True)
class ConversationHistory:
    """Reads a web chat's history from persistence at `base_url`, with the key in env var `key_env`."""

    base_url: str
    key_env: str | None
    timeout_s: float = 10.0
    texts: FixedTexts = DEFAULT_TEXTS  # the web platform's, so stored endings read as live ones do

    async def read(self, chat_id: str, tenant_id: str) -> History:
        """The chat's history; unreadable, an `HTTPException` the page gets (503: no key, 502: persistence failed)."""
        key = os.environ.get(self.key_env) if self.key_env else None
        if not key:
            raise HTTPException(
                503,
                "delivery has no credential to read the chat's history: set platforms.web.history_key_env to an "
                "env var holding a key with the 'conversations:read' scope"
                + (f" (env var {self.key_env} is empty)" if self.key_env else ""),
            )
        path = f"{self.base_url.rstrip('/')}/v1/conversations/{quote(conversation_key(KnownPlatform.WEB, chat_id, tenant_id=tenant_id), safe='')}"
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, headers={"authorization": f"Bearer {key}"}) as http:
                runs = await _all(http, f"{path}/runs")
                messages = await _all(http, f"{path}/messages")
        except httpx.HTTPStatusError as err:
            raise HTTPException(502, f"persistence answered {err.response.status_code} to delivery's read") from err
        except httpx.HTTPError as err:
            raise HTTPException(502, f"persistence unreachable: {err!r}") from err
        return History(items=_items(runs, messages, tenant_id, self.texts)[-KEEP_ITEMS:])


async def _all(http: httpx.AsyncClient, url: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params: dict[str, Any] = {"limit": PAGE_SIZE} | ({"cursor": cursor} if cursor else {})
        response = await http.get(url, params=params)
        response.raise_for_status()
        page = response.json()
        items += page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return items


def _items(
    runs: list[dict[str, Any]], messages: list[dict[str, Any]], tenant_id: str, texts: FixedTexts = DEFAULT_TEXTS
) -> list[HistoryItem]:
    # Chat ids are the gateway's: another tenant's chat of the same id is not this session's.
    mine = {r["run_id"]: r for r in runs if r.get("tenant_id") in (tenant_id, None)}
    items: list[HistoryItem] = []  # answers' texts still Markdown here: an ending may be appended
    current: str | None = None

    def close(run_id: str | None) -> None:
        run = mine.get(run_id) if run_id else None
        if run is None or run["status"] not in (RunStatus.FAILED, RunStatus.INTERRUPTED):
            return
        reason = str(run.get("reason"))
        known = FinishReason(reason) if reason in FinishReason._value2member_map_ else None
        ending = texts.ending(RunStatus(run["status"]), known, run.get("error"))
        last = items[-1] if items else None
        if last is not None and last.run_id == run["run_id"] and last.role is MessageRole.ASSISTANT:
            last.text += ending.marker  # as `stream_machine._end_visibly` appends it to the open message
        else:
            follow_up = HistoryItem(role=MessageRole.ASSISTANT, text=ending.follow_up, run_id=run["run_id"])
            items.append(follow_up.model_copy(update={"session_id": run.get("session_id")}))

    for m in messages:
        run_id = m["root_run_id"]
        if run_id not in mine:
            continue
        if run_id != current:
            close(current)
            current = run_id
        if m["role"] in (MessageRole.USER, MessageRole.ASSISTANT) and m["content"].strip():
            role, session = MessageRole(m["role"]), m.get("session_id")
            items.append(HistoryItem(role=role, text=m["content"], run_id=run_id, session_id=session))
    close(current)
    return [_as_shown(item, texts) for item in items]


def _as_shown(item: HistoryItem, texts: FixedTexts) -> HistoryItem:
    """An answer as its final live frame showed it (`WebAdapter._frame`): rendered, its ending read from that."""
    if item.role is not MessageRole.ASSISTANT:
        return item
    shown = render_frame(item.text, TextFormat.HTML, final=True)
    ending = ending_of(visible_text(shown), texts)
    return item.model_copy(update={"text": shown, "markup": TextFormat.HTML, "ending": ending})
