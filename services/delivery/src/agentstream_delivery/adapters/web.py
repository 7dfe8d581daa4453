"""The browser as a platform: each conversation is an SSE stream of message frames.

`send`/`edit` record the frame and push it to every open `GET /v1/web/{chat}/events`
connection of that chat; a new connection first receives the chat's recent messages,
so a page opened (or reconnected) mid-stream catches up. Every frame carries the whole
message text — the page replaces, never appends — so a lost frame is healed by the next.
The routes live in `web_http`; the page itself in `static/`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters.base import AdapterError

KEEP_MESSAGES = 200  # per chat, for pages that connect late
SUBSCRIBER_QUEUE = 1000  # frames a slow browser may lag behind before it is disconnected


@dataclass
class WebFrame:
    message_id: str
    text: str
    final: bool
    op: str  # "send" | "edit"

    def sse(self) -> bytes:
        return f"data: {json.dumps(asdict(self), ensure_ascii=False)}\n\n".encode()


class _Closed:
    """Sentinel: the adapter is closing; end the stream."""


class WebAdapter:
    platform = "web"
    can_edit = True
    max_length = 100_000

    def __init__(self, edit_interval: float = 0.2, keep: int = KEEP_MESSAGES) -> None:
        self.edit_interval = edit_interval
        self.keep = keep
        self._ids = itertools.count(1)
        self._chats: dict[str, OrderedDict[str, WebFrame]] = defaultdict(OrderedDict)
        self._subscribers: dict[str, set[asyncio.Queue[WebFrame | _Closed]]] = defaultdict(set)

    def messages(self, chat_id: str) -> list[WebFrame]:
        return list(self._chats.get(chat_id, {}).values())

    async def send(self, target: ReplyTarget, text: str, *, final: bool = False) -> str:
        frame = WebFrame(f"w{next(self._ids)}", text, final, "send")
        chat = self._chats[target.chat_id]
        chat[frame.message_id] = frame
        while len(chat) > self.keep:
            chat.popitem(last=False)
        self._publish(target.chat_id, frame)
        return frame.message_id

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, final: bool = False) -> None:
        chat = self._chats.get(target.chat_id, OrderedDict())
        if message_id not in chat:
            raise AdapterError(f"message {message_id} not found in web chat {target.chat_id}")
        frame = WebFrame(message_id, text, final, "edit")
        chat[message_id] = frame
        self._publish(target.chat_id, frame)

    async def close(self) -> None:
        for queues in self._subscribers.values():
            for q in queues:
                _offer(q, _Closed())

    async def frames(self, chat_id: str, heartbeat_s: float = 15.0) -> AsyncIterator[bytes]:
        """The SSE body of one connection: recent messages, then every new frame, then heartbeats."""
        queue: asyncio.Queue[WebFrame | _Closed] = asyncio.Queue(maxsize=SUBSCRIBER_QUEUE)
        self._subscribers[chat_id].add(queue)
        try:
            yield b": connected\n\n"
            for frame in self.messages(chat_id):
                yield frame.sse()
            while True:
                try:
                    async with asyncio.timeout(heartbeat_s):
                        item = await queue.get()
                except TimeoutError:
                    yield b": keep-alive\n\n"  # keeps proxies from closing an idle stream
                    continue
                if isinstance(item, _Closed):
                    return
                yield item.sse()
        finally:
            self._subscribers[chat_id].discard(queue)

    def _publish(self, chat_id: str, frame: WebFrame) -> None:
        for q in list(self._subscribers.get(chat_id, ())):
            if not _offer(q, frame):
                # A browser this far behind is dropped; on reconnect it gets the current texts.
                self._subscribers[chat_id].discard(q)
                _offer(q, _Closed(), force=True)


def _offer(q: asyncio.Queue[WebFrame | _Closed], item: WebFrame | _Closed, force: bool = False) -> bool:
    try:
        q.put_nowait(item)
        return True
    except asyncio.QueueFull:
        if force:
            q.get_nowait()
            q.put_nowait(item)
        return False
