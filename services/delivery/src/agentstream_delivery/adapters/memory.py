"""In-memory platform for tests and demos: remembers every send and edit, per chat.

Chats idle for `ChatBounds.idle_ttl_s` (and the least recently used beyond `max_chats`) are
forgotten, unless a message of theirs is still a preview, so a long demo stays bounded.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from agentstream.config import TextFormat, ToolProgress
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import AdapterError, Capabilities, ChatBounds, InProcessAdapter


@dataclass
class MemoryMessage:
    message_id: str
    text: str
    edits: int = 0
    final: bool = False
    history: list[str] = field(default_factory=list)  # every text the message showed, in order

    def to_json(self) -> dict[str, object]:
        # One platform message is created by exactly one send; a duplicate send shows as another message.
        return {
            "message_id": self.message_id,
            "text": self.text,
            "edits": self.edits,
            "sends": 1,
            "final": self.final,
            "history": list(self.history),
        }


class MemoryAdapter(InProcessAdapter[list[MemoryMessage]]):
    platform: str = KnownPlatform.MEMORY

    def __init__(self, edit_interval: float = 0.05, bounds: ChatBounds = ChatBounds()) -> None:
        super().__init__(
            Capabilities(max_length=4096, edit_interval=edit_interval, tool_progress=ToolProgress.OFF), bounds
        )
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()

    def messages(self, chat_id: str) -> list[MemoryMessage]:
        return list(self._chats.peek(chat_id) or [])

    def chats(self) -> list[str]:
        return list(self._chats)

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        msg = MemoryMessage(f"m{next(self._ids)}", text, final=final, history=[text])
        self._chats.get_or_create(target.chat_id, list).append(msg)
        await self._notify()
        return msg.message_id

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        msg = next((m for m in self._chats.get(target.chat_id) or [] if m.message_id == message_id), None)
        if msg is None:
            raise AdapterError(f"message {message_id} not found in chat {target.chat_id}")
        msg.text, msg.edits, msg.final = text, msg.edits + 1, final
        msg.history.append(text)
        await self._notify()

    async def close(self) -> None:
        pass

    def _in_use(self, chat_id: str, chat: list[MemoryMessage]) -> bool:
        return any(not m.final for m in chat)  # a preview: its stream will still edit it

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(
        self, chat_id: str, predicate: Callable[[list[MemoryMessage]], bool], timeout: float = 10.0
    ) -> list[MemoryMessage]:
        """Wait until `predicate(messages of chat)` holds; returns those messages."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(self.messages(chat_id)))
        return self.messages(chat_id)

    async def wait_for_final(self, chat_id: str, count: int = 1, timeout: float = 10.0) -> list[MemoryMessage]:
        """Wait until at least `count` messages of the chat got their final frame."""
        return await self.wait_for(chat_id, lambda ms: sum(m.final for m in ms) >= count, timeout)
