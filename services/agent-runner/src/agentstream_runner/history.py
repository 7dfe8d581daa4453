"""Conversation history: how much, what the model sees, what is new input.

Pure decisions; loading is the `HistoryStore` port (the runner's own database
session in the service, a fake in tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agentstream.contracts import ChatMessage, MessageRole, RunOptions

DEFAULT_HISTORY_SIZE = 20
SUMMARY_CHARS = 200


@dataclass(frozen=True)
class StoredMessage:
    """One row of the `messages` table, as far as the model cares."""

    role: str
    content: str
    name: str | None = None


class HistoryStore(Protocol):
    async def recent(self, conversation_key: str, session_id: str | None, limit: int) -> list[StoredMessage]:
        """The last `limit` messages of the session, oldest first."""
        ...


def history_size(options: RunOptions, assistant_size: int | None) -> int:
    """Request option > assistant > 20."""
    if options.history_size is not None:
        return options.history_size
    return assistant_size if assistant_size is not None else DEFAULT_HISTORY_SIZE


def replay(rows: Sequence[StoredMessage]) -> list[ChatMessage]:
    """Rows as model messages. A stored tool call is replayed as a short assistant
    summary: its original assistant message with the call ids is not stored, and a
    `tool` message without it would be rejected by the APIs."""
    out: list[ChatMessage] = []
    for row in rows:
        if row.role == MessageRole.TOOL:
            content = row.content if len(row.content) <= SUMMARY_CHARS else row.content[:SUMMARY_CHARS] + "…"
            out.append(ChatMessage(role=MessageRole.ASSISTANT, content=f"[tool {row.name or '?'} returned: {content}]"))
        elif row.role in (MessageRole.USER, MessageRole.ASSISTANT):
            out.append(ChatMessage(role=row.role, content=row.content))  # type: ignore[arg-type]
    return out


def _same(a: ChatMessage, b: ChatMessage) -> bool:
    return a.role == b.role and a.content == b.content


def drop_overlap(history: Sequence[ChatMessage], incoming: Sequence[ChatMessage]) -> list[ChatMessage]:
    """`incoming` without the longest suffix of `history` that equals its prefix
    (a client that resends the conversation so far does not duplicate it)."""
    for size in range(min(len(history), len(incoming)), 0, -1):
        tail = history[len(history) - size :]
        if all(_same(h, i) for h, i in zip(tail, incoming[:size], strict=True)):
            return list(incoming[size:])
    return list(incoming)
