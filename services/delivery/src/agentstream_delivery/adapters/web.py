"""The browser as a platform: each conversation is an SSE stream of message frames, fanned out through Kafka.

Two halves, so that any delivery replica serves any chat:

- **platform side** (`send`/`edit`, called by the stream that delivers a run): each frame
  becomes a `WebFrame` record handed to `sink` — in the service, a publish on `web-frames`
  keyed by the chat id. Nothing is shown from process memory here.
- **page side** (`receive`, fed by `web_reader` with every record of `web-frames`, each
  replica reading all partitions itself): the frame is remembered per chat and pushed to the
  connected pages of that chat. Its SSE id is its Kafka coordinates (`FrameId`), the same on
  every replica, so a page that reconnects to another replica with `Last-Event-ID` gets
  exactly the frames it missed.

A chat is a tenant's: chat ids are the gateway's, so two tenants may both have a chat `alice`.
Frames carry their run's tenant and are kept and pushed per (tenant, chat) — `chat_ref` — so a
session sees only its own tenant's chat.

Every frame carries the whole message text — the page replaces, never appends — so resuming
needs only the newest frame of each message past the page's id. The text is the renderer's
sanitised HTML (`markup: "html"`, see `formatting.web_html`) or plain text the page shows as such. Without a sink (unit tests,
no Kafka) frames loop back to `receive` with local ids.

A chat's recent messages are forgotten once it has been idle `ChatBounds.idle_ttl_s` (and the
least recently used beyond `max_chats`), never while a page is connected or a message
of the chat is still a preview (its stream is open and will edit it).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from aiokafka.errors import KafkaError

from agentstream.config import TextFormat, ToolProgress
from agentstream.contracts import KnownPlatform, ReplyTarget, WebFrame, WebFrameKind, WebFrameOp, new_id
from agentstream.contracts.keys import tenant_scoped
from agentstream_delivery.adapters.base import (
    DELIVERING_RUN,
    Capabilities,
    ChatBounds,
    InProcessAdapter,
    Transient,
)
from agentstream_delivery.adapters.web_endings import ending_of, visible_text

KEEP_MESSAGES = 200  # per chat, for pages that connect late
SUBSCRIBER_QUEUE = 1000  # frames a slow browser may lag behind before it is disconnected
FrameSink = Callable[[WebFrame], Awaitable[None]]


def chat_ref(chat_id: str, tenant_id: str | None) -> str:
    """Which chat a frame or a page belongs to: the chat id inside its tenant."""
    return tenant_scoped(tenant_id, chat_id)


@dataclass(frozen=True, order=True)
class FrameId:
    """A frame's SSE id: where its record sits in `web-frames` (one chat → one partition)."""

    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.partition}-{self.offset}"

    @staticmethod
    def parse(value: str | None) -> FrameId | None:
        """None for a missing or foreign id: the page then gets every frame kept."""
        try:
            partition, offset = (value or "").split("-")
            return FrameId(int(partition), int(offset))
        except ValueError:
            return None

    def follows(self, last: FrameId | None) -> bool:
        """Whether a page that saw `last` still lacks this frame (another partition: it may)."""
        return last is None or last.partition != self.partition or self.offset > last.offset


@dataclass(frozen=True)
class Shown:
    id: FrameId
    frame: WebFrame

    def sse(self) -> bytes:
        body = self.frame.model_dump(mode="json", include=PAGE_FIELDS)
        return f"id: {self.id}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


PAGE_FIELDS = {"message_id", "run_id", "op", "text", "markup", "final", "kind", "ending"}


class _Closed:
    """Sentinel: the adapter is closing; end the stream."""


class WebAdapter(InProcessAdapter[OrderedDict[str, Shown]]):
    platform: str = KnownPlatform.WEB

    def __init__(
        self,
        edit_interval: float = 0.2,
        keep: int = KEEP_MESSAGES,
        bounds: ChatBounds = ChatBounds(),
        sink: FrameSink | None = None,
    ) -> None:
        super().__init__(
            Capabilities(
                max_length=100_000,
                edit_interval=edit_interval,
                tool_progress=ToolProgress.NEW,
                marks_tool_ends=True,  # an edit costs nothing here; the page shows which tools are done
                formatting=TextFormat.HTML,
            ),
            bounds,
        )
        self.keep = keep
        self.sink = sink
        self._local_offsets = itertools.count()
        # Only chats with a connected page have an entry: the last one to leave removes it. Keyed, like
        # `_chats`, by `chat_ref`.
        self._subscribers: dict[str, set[asyncio.Queue[Shown | _Closed]]] = {}

    def __len__(self) -> int:
        return len(self._chats)

    def messages(self, chat_id: str, tenant_id: str | None = None) -> list[WebFrame]:
        chat = self._chats.peek(chat_ref(chat_id, tenant_id))
        return [] if chat is None else [s.frame for s in chat.values()]

    # -- platform side --------------------------------------------------------------
    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        frame = self._frame(target, new_id(), text, final, WebFrameOp.SEND, markup)
        await self._emit(frame)
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
        await self._emit(self._frame(target, message_id, text, final, WebFrameOp.EDIT, markup))

    def _frame(
        self, target: ReplyTarget, message_id: str, text: str, final: bool, op: WebFrameOp, markup: TextFormat
    ) -> WebFrame:
        words = visible_text(text) if markup == TextFormat.HTML else text  # the tool line and endings as shown
        texts = self.capabilities.texts
        return WebFrame(
            chat_id=target.chat_id,
            tenant_id=target.tenant_id,
            message_id=message_id,
            run_id=DELIVERING_RUN.get(),
            op=op,
            text=text,
            markup=markup,
            final=final,
            kind=WebFrameKind.TOOL if words.startswith(texts.tool_line_prefix) else WebFrameKind.TEXT,
            ending=ending_of(words, texts) if final else None,
        )

    async def _emit(self, frame: WebFrame) -> None:
        if self.sink is not None:
            try:
                await self.sink(frame)
            except (KafkaError, TimeoutError) as err:
                # The broker did not take it: the deliverer retries. A frame that did land is sent
                # twice at worst, which shows nothing new (frames are whole texts).
                raise Transient(f"web frame not published: {err!r}") from err
        else:
            self.receive(FrameId(0, next(self._local_offsets)), frame)

    # -- page side ------------------------------------------------------------------
    def receive(self, frame_id: FrameId, frame: WebFrame) -> None:
        """A frame read from `web-frames`: remembered for late pages, pushed to connected ones."""
        ref = chat_ref(frame.chat_id, frame.tenant_id)
        chat = self._chats.get_or_create(ref, OrderedDict)
        shown = Shown(frame_id, frame)
        chat[frame.message_id] = shown  # an edit keeps the message's place: pages order by first frame
        while len(chat) > self.keep:
            chat.popitem(last=False)
        for q in list(self._subscribers.get(ref, ())):
            if not _offer(q, shown):
                # A browser this far behind is dropped; it reconnects with its last id and catches up.
                self._unsubscribe(ref, q)
                _offer(q, _Closed(), force=True)

    async def close(self) -> None:
        for queues in self._subscribers.values():
            for q in queues:
                _offer(q, _Closed())

    async def frames(
        self, chat_id: str, after: FrameId | None = None, heartbeat_s: float = 15.0, tenant_id: str | None = None
    ) -> AsyncIterator[bytes]:
        """The SSE body of one connection: what the page lacks of the kept messages, then every new
        frame, then heartbeats. `after`: the page's `Last-Event-ID`; `tenant_id`: the session's."""
        ref = chat_ref(chat_id, tenant_id)
        # Subscribing and taking the backlog happen together (no await between): nothing is missed
        # or sent twice in between.
        queue: asyncio.Queue[Shown | _Closed] = asyncio.Queue(maxsize=SUBSCRIBER_QUEUE)
        self._subscribers.setdefault(ref, set()).add(queue)
        chat = self._chats.peek(ref)
        backlog = [s for s in (chat.values() if chat is not None else ()) if s.id.follows(after)]
        try:
            yield b": connected\n\n"
            for shown in backlog:
                yield shown.sse()
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
            self._unsubscribe(ref, queue)

    def _in_use(self, ref: str, chat: OrderedDict[str, Shown]) -> bool:
        return ref in self._subscribers or any(not s.frame.final for s in chat.values())

    def _unsubscribe(self, ref: str, queue: asyncio.Queue[Shown | _Closed]) -> None:
        queues = self._subscribers.get(ref)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._subscribers[ref]


def _offer(q: asyncio.Queue[Shown | _Closed], item: Shown | _Closed, force: bool = False) -> bool:
    try:
        q.put_nowait(item)
        return True
    except asyncio.QueueFull:
        if force:
            q.get_nowait()
            q.put_nowait(item)
        return False
