"""The browser as a platform: each conversation is an SSE stream of message frames.

`send`/`edit` record the frame and push it to every open `GET /v1/web/{chat}/events`
connection of that chat; a new connection first receives the chat's recent messages,
so a page opened (or reconnected) mid-stream catches up. Every frame carries the whole
message text — the page replaces, never appends — so a lost frame is healed by the next.
The text is the renderer's sanitised HTML (`markup: "html"`, see `formatting.web_html`),
or plain text the page shows as such.
The routes live in `web_http`; the page itself in `static/`.

A chat's recent messages are forgotten once it has been idle `ChatBounds.idle_ttl_s` (and the
least recently used beyond `max_chats`), never while a page is connected or a message
of the chat is still a preview (its stream is open and will edit it).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass

from agentstream.config import TextFormat, ToolProgress
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import AdapterError, Capabilities, ChatBounds, InProcessAdapter

KEEP_MESSAGES = 200  # per chat, for pages that connect late
SUBSCRIBER_QUEUE = 1000  # frames a slow browser may lag behind before it is disconnected


@dataclass
class WebFrame:
    message_id: str
    text: str
    final: bool
    op: str  # "send" | "edit"
    markup: str = TextFormat.PLAIN  # "html": the renderer's sanitised HTML; "plain": text for `textContent`

    def sse(self) -> bytes:
        return f"data: {json.dumps(asdict(self), ensure_ascii=False)}\n\n".encode()


class _Closed:
    """Sentinel: the adapter is closing; end the stream."""


class WebAdapter(InProcessAdapter[OrderedDict[str, WebFrame]]):
    platform: str = KnownPlatform.WEB

    def __init__(
        self, edit_interval: float = 0.2, keep: int = KEEP_MESSAGES, bounds: ChatBounds = ChatBounds()
    ) -> None:
        super().__init__(
            Capabilities(
                max_length=100_000,
                edit_interval=edit_interval,
                tool_progress=ToolProgress.OFF,
                formatting=TextFormat.HTML,
            ),
            bounds,
        )
        self.keep = keep
        self._ids = itertools.count(1)
        # Only chats with a connected page have an entry: the last one to leave removes it.
        self._subscribers: dict[str, set[asyncio.Queue[WebFrame | _Closed]]] = {}

    def __len__(self) -> int:
        return len(self._chats)

    def messages(self, chat_id: str) -> list[WebFrame]:
        chat = self._chats.peek(chat_id)
        return [] if chat is None else list(chat.values())

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        frame = WebFrame(f"w{next(self._ids)}", text, final, "send", markup)
        chat = self._chats.get_or_create(target.chat_id, OrderedDict)
        chat[frame.message_id] = frame
        while len(chat) > self.keep:
            chat.popitem(last=False)
        self._publish(target.chat_id, frame)
        return frame.message_id

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        chat = self._chats.get(target.chat_id)
        if chat is None or message_id not in chat:
            raise AdapterError(f"message {message_id} not found in web chat {target.chat_id}")
        frame = WebFrame(message_id, text, final, "edit", markup)
        chat[message_id] = frame
        self._publish(target.chat_id, frame)

    async def close(self) -> None:
        for queues in self._subscribers.values():
            for q in queues:
                _offer(q, _Closed())

    async def frames(self, chat_id: str, heartbeat_s: float = 15.0) -> AsyncIterator[bytes]:
        """The SSE body of one connection: recent messages, then every new frame, then heartbeats."""
        queue: asyncio.Queue[WebFrame | _Closed] = asyncio.Queue(maxsize=SUBSCRIBER_QUEUE)
        self._subscribers.setdefault(chat_id, set()).add(queue)
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
            self._unsubscribe(chat_id, queue)

    def _in_use(self, chat_id: str, chat: OrderedDict[str, WebFrame]) -> bool:
        return chat_id in self._subscribers or any(not f.final for f in chat.values())

    def _unsubscribe(self, chat_id: str, queue: asyncio.Queue[WebFrame | _Closed]) -> None:
        queues = self._subscribers.get(chat_id)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._subscribers[chat_id]

    def _publish(self, chat_id: str, frame: WebFrame) -> None:
        for q in list(self._subscribers.get(chat_id, ())):
            if not _offer(q, frame):
                # A browser this far behind is dropped; on reconnect it gets the current texts.
                self._unsubscribe(chat_id, q)
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
