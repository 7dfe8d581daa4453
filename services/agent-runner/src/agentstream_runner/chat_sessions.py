"""History sessions (`sessions` table): which session a conversation's runs belong to.

The runner is the one writer per conversation, so it owns the current session: a
run without `session_id` gets the conversation's open session (one is opened on
first use), and `ResetConversation` closes it and opens a new one — history, which
is read per session, is empty afterwards.
"""

from __future__ import annotations

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
