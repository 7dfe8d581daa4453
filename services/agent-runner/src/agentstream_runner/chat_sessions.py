"""History sessions (`sessions` table): which session a conversation's runs belong to.

The runner is the one writer per conversation, so it owns the current session: a
run without `session_id` gets the conversation's open session (one is opened on
first use), and `ResetConversation` closes it and opens a new one — history, which
is read per session, is empty afterwards.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import new_id, utcnow
from agentstream.db.models_persistence import ChatSession
from agentstream.db.session import autocommitting

MAX_BATCH = 500  # conversations resolved in one transaction


# The newest open session of each key (as the ORM path's "the newest open one wins"), and one
# opened for each key that has none.
_OPEN_SESSIONS = text(
    """
    WITH found AS (
        SELECT DISTINCT ON (conversation_key) conversation_key, session_id
        FROM sessions
        WHERE conversation_key = ANY(CAST(:keys AS varchar[])) AND ended_at IS NULL
        ORDER BY conversation_key, started_at DESC
    ), opened AS (
        INSERT INTO sessions (session_id, conversation_key, started_at)
        SELECT n.session_id, n.conversation_key, :now
        FROM unnest(CAST(:keys AS varchar[]), CAST(:ids AS varchar[])) AS n(conversation_key, session_id)
        WHERE n.conversation_key NOT IN (SELECT conversation_key FROM found)
        RETURNING conversation_key, session_id
    )
    SELECT conversation_key, session_id, false FROM found
    UNION ALL
    SELECT conversation_key, session_id, true FROM opened
    """
)


@dataclass(frozen=True)
class Resolved:
    """The open session of each conversation asked for, and which of them were opened just now."""

    ids: dict[str, str]
    opened: frozenset[str] = frozenset()


class SessionStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        # On PostgreSQL the read and the insert are one statement, outside a transaction: one
        # round trip where BEGIN, SELECT, INSERT and COMMIT were four, on a new conversation's way
        # to its model request (docs/decisions.md, "New conversations are resolved in batches").
        single = autocommitting(sessions)
        self._one_statement = single if single is not sessions else None

    async def current(self, conversation_key: str) -> str:
        """The open session of the conversation, opened now if there is none."""
        return (await self.current_many([conversation_key])).ids[conversation_key]

    async def current_many(self, conversation_keys: Sequence[str]) -> Resolved:
        """The open session of each conversation, opening the missing ones: one read, one
        insert, one commit for all of them."""
        keys = list(dict.fromkeys(conversation_keys))
        if self._one_statement is not None:
            return await self._current_many_at_once(self._one_statement, keys)
        async with self._sessions() as session, session.begin():
            rows = await session.execute(
                select(ChatSession.conversation_key, ChatSession.session_id)
                .where(ChatSession.conversation_key.in_(keys), ChatSession.ended_at.is_(None))
                .order_by(ChatSession.started_at)
            )
            found = {key: session_id for key, session_id in rows}  # the newest open one wins
            opened = {key: new_id() for key in keys if key not in found}
            if opened:
                now = utcnow()
                await session.execute(
                    insert(ChatSession),
                    [
                        {"session_id": session_id, "conversation_key": key, "started_at": now}
                        for key, session_id in opened.items()
                    ],
                )
        return Resolved({**found, **opened}, frozenset(opened.values()))

    async def _current_many_at_once(self, sessions: async_sessionmaker[AsyncSession], keys: list[str]) -> Resolved:
        ids = [new_id() for _ in keys]
        async with sessions() as session:
            rows = await session.execute(_OPEN_SESSIONS, {"keys": keys, "ids": ids, "now": utcnow()})
        current: dict[str, str] = {}
        opened: set[str] = set()
        for key, session_id, is_new in rows:
            current[key] = session_id
            if is_new:
                opened.add(session_id)
        return Resolved(current, frozenset(opened))

    async def reset(self, conversation_key: str, reason: str = "reset") -> str:
        """Close the open session(s) and open a new one; the new session id."""
        async with self._sessions() as session, session.begin():
            await session.execute(
                update(ChatSession)
                .where(ChatSession.conversation_key == conversation_key, ChatSession.ended_at.is_(None))
                .values(ended_at=utcnow(), end_reason=reason)
            )
            session_id = new_id()
            session.add(ChatSession(session_id=session_id, conversation_key=conversation_key, started_at=utcnow()))
            return session_id


class KnownSessions:
    """The current session of conversations this runner owns, kept after the first read.

    The runner is their only writer while it owns the partition, so what it read or opened
    stays true until it resets the conversation (which updates the entry) or loses the
    partition (`forget_all`: the next owner may reset them). Bounded: the least recently
    used conversations are forgotten first and simply read again.

    Conversations not known yet are resolved in batches: while one batch is in the
    database, the ones asked for meanwhile wait and go together in the next. A busy
    runner starting many new conversations pays one transaction per batch instead of
    one per run; an idle one waits for nobody. Batches and resets never overlap, so a
    batch cannot read a session that a concurrent reset is closing.

    A session this runner opened (a new conversation's, or a reset's) is *new* until a run takes
    it with `take_new`: no run has used it, so no message of it is stored and its history is
    empty without reading it.
    """

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._known: OrderedDict[str, str] = OrderedDict()
        self._waiting: dict[str, list[asyncio.Future[str]]] = {}
        self._resolver: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()  # one batch or one reset at a time
        self._generation = 0  # bumped by forget_all: a batch read before it is not remembered
        self._new: set[str] = set()  # opened here, not yet taken by a run

    async def current(self, store: SessionStore, conversation_key: str) -> str:
        session_id = self._known.get(conversation_key)
        if session_id is not None:
            self._known.move_to_end(conversation_key)
            return session_id
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(conversation_key, []).append(answer)
        if self._resolver is None or self._resolver.done():
            self._resolver = asyncio.create_task(self._resolve(store))
        return await answer

    async def reset(self, store: SessionStore, conversation_key: str) -> str:
        async with self._writing:
            if (old := self._known.pop(conversation_key, None)) is not None:  # a failed reset must not leave it known
                self._new.discard(old)
            session_id = await store.reset(conversation_key)
            self._remember(conversation_key, session_id)
            self._new.add(session_id)
            return session_id

    def take_new(self, session_id: str) -> bool:
        """Whether `session_id` was opened here and no run took it before this one (then no
        message of it can be stored yet)."""
        if session_id in self._new:
            self._new.discard(session_id)
            return True
        return False

    def forget_all(self) -> None:
        self._known.clear()
        self._new.clear()
        self._generation += 1

    async def _resolve(self, store: SessionStore) -> None:
        while self._waiting:
            keys = list(self._waiting)[:MAX_BATCH]
            batch = {key: self._waiting.pop(key) for key in keys}
            generation = self._generation
            try:
                async with self._writing:
                    found = await store.current_many(keys)
            except Exception as err:  # every waiter of the batch gets the error
                for answers in batch.values():
                    for answer in answers:
                        if not answer.done():
                            answer.set_exception(err)
                continue
            for key, answers in batch.items():
                session_id = found.ids[key]
                if generation == self._generation:
                    self._remember(key, session_id)
                    if session_id in found.opened:
                        self._new.add(session_id)
                for answer in answers:
                    if not answer.done():
                        answer.set_result(session_id)

    def _remember(self, conversation_key: str, session_id: str) -> None:
        replaced = self._known.get(conversation_key)
        if replaced is not None and replaced != session_id:
            self._new.discard(replaced)
        self._known[conversation_key] = session_id
        self._known.move_to_end(conversation_key)
        while len(self._known) > self._limit:
            self._new.discard(self._known.popitem(last=False)[1])  # bounded with what it belongs to
