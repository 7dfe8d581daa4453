"""History sessions (`sessions` table): which session a conversation's runs belong to.

The runner is the one writer per conversation, so it owns the current session: a
run without `session_id` gets the conversation's open session (one is opened on
first use), and `ResetConversation` closes it and opens a new one — history, which
is read per session, is empty afterwards.
"""

from __future__ import annotations

from collections import OrderedDict

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import new_id, utcnow
from agentstream.db.models_persistence import ChatSession


class SessionStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def current(self, conversation_key: str) -> str:
        """The open session of the conversation, opened now if there is none."""
        async with self._sessions() as session, session.begin():
            found = await session.scalar(
                select(ChatSession.session_id)
                .where(ChatSession.conversation_key == conversation_key, ChatSession.ended_at.is_(None))
                .order_by(ChatSession.started_at.desc()).limit(1))
            if found is not None:
                return str(found)
            return self._open(session, conversation_key)

    async def reset(self, conversation_key: str, reason: str = "reset") -> str:
        """Close the open session(s) and open a new one; the new session id."""
        async with self._sessions() as session, session.begin():
            await session.execute(
                update(ChatSession)
                .where(ChatSession.conversation_key == conversation_key, ChatSession.ended_at.is_(None))
                .values(ended_at=utcnow(), end_reason=reason))
            return self._open(session, conversation_key)

    @staticmethod
    def _open(session: AsyncSession, conversation_key: str) -> str:
        session_id = new_id()
        session.add(ChatSession(session_id=session_id, conversation_key=conversation_key, started_at=utcnow()))
        return session_id


class KnownSessions:
    """The current session of conversations this runner owns, kept after the first read.

    The runner is their only writer while it owns the partition, so what it read or opened
    stays true until it resets the conversation (which updates the entry) or loses the
    partition (`forget_all`: the next owner may reset them). Bounded: the least recently
    used conversations are forgotten first and simply read again.
    """

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._known: OrderedDict[str, str] = OrderedDict()

    async def current(self, store: SessionStore, conversation_key: str) -> str:
        session_id = self._known.get(conversation_key)
        if session_id is None:
            session_id = await store.current(conversation_key)
        self._remember(conversation_key, session_id)
        return session_id

    async def reset(self, store: SessionStore, conversation_key: str) -> str:
        self._known.pop(conversation_key, None)  # a failed reset must not leave the old one known
        session_id = await store.reset(conversation_key)
        self._remember(conversation_key, session_id)
        return session_id

    def forget_all(self) -> None:
        self._known.clear()

    def _remember(self, conversation_key: str, session_id: str) -> None:
        self._known[conversation_key] = session_id
        self._known.move_to_end(conversation_key)
        while len(self._known) > self._limit:
            self._known.popitem(last=False)
