"""The runner's own database reads: history rows and role overrides.

Read-only: persistence writes `messages`; `role_settings` is written by admins
(CLI / SQL). Each read is one short session; role overrides are cached briefly.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.db.models import Message
from agentstream.db.models_runner import RoleSetting
from agentstream_runner.connectors.resolve import RoleOverrides
from agentstream_runner.history import StoredMessage


class SqlStores:
    """History and role overrides. With `without_run`, history as that run first saw it: the
    session's messages minus the run's own rows (a resumed run's input and partial answer
    were stored when it ended)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], without_run: str | None = None) -> None:
        self._sessions = sessions
        self._without_run = without_run

    async def recent(self, conversation_key: str, session_id: str | None, limit: int) -> list[StoredMessage]:
        if limit <= 0:
            return []
        query = select(Message.role, Message.content, Message.name).where(Message.conversation_key == conversation_key)
        if self._without_run is not None:
            query = query.where(Message.root_run_id != self._without_run)
        if session_id is not None:
            query = query.where(Message.session_id == session_id)
        query = query.order_by(Message.id.desc()).limit(limit)
        async with self._sessions() as session:
            rows = (await session.execute(query)).all()
        return [StoredMessage(role=r.role, content=r.content or "", name=r.name) for r in reversed(rows)]

    async def overrides(self, user_id: str | None, team_id: str | None) -> RoleOverrides:
        wanted = [
            and_(RoleSetting.scope == scope, RoleSetting.subject_id == subject)
            for scope, subject in (("user", user_id), ("team", team_id))
            if subject
        ]
        if not wanted:
            return RoleOverrides()
        found: dict[str, dict[str, str]] = {"user": {}, "team": {}}
        async with self._sessions() as session:  # one query for the user's and the team's rows
            rows = await session.execute(
                select(RoleSetting.scope, RoleSetting.role, RoleSetting.connector_id).where(or_(*wanted))
            )
        for scope, role, connector_id in rows:
            found[scope][role] = connector_id
        return RoleOverrides(user=found["user"], team=found["team"])


class RoleCache:
    """Role overrides read at most once per `ttl_s` per (user, team).

    Every run start needs them; reading them each time put a database round trip (an
    aiosqlite thread hop that queues behind a busy event loop) on every start. Admins'
    changes to `role_settings` take effect within `ttl_s`. A read under way is shared by
    whoever asks for the same overrides meanwhile (the launcher starts it early, the run
    asks for it when it gets there).
    """

    def __init__(self, ttl_s: float = 5.0, limit: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s, self._limit, self._clock = ttl_s, limit, clock
        self._entries: OrderedDict[tuple[str | None, str | None], tuple[float, RoleOverrides]] = OrderedDict()
        self._reading: dict[tuple[str | None, str | None], asyncio.Task[RoleOverrides]] = {}

    def over(self, stores: SqlStores) -> _CachedRoles:
        return _CachedRoles(self, stores)

    def warm(self, stores: SqlStores, user_id: str | None, team_id: str | None) -> None:
        """Start reading these overrides now unless they are cached or being read."""
        self._fresh_or_reading(stores, (user_id, team_id))

    async def get(self, stores: SqlStores, user_id: str | None, team_id: str | None) -> RoleOverrides:
        found = self._fresh_or_reading(stores, (user_id, team_id))
        if isinstance(found, RoleOverrides):
            return found
        # shield: a run cancelled while it waits does not cancel the read others share
        return await asyncio.shield(found)

    def _fresh_or_reading(
        self, stores: SqlStores, key: tuple[str | None, str | None]
    ) -> RoleOverrides | asyncio.Task[RoleOverrides]:
        entry = self._entries.get(key)
        if entry is not None and self._clock() - entry[0] < self._ttl_s:
            return entry[1]
        reading = self._reading.get(key)
        if reading is None:
            reading = self._reading[key] = asyncio.create_task(self._read(stores, key))
            reading.add_done_callback(_retrieved)
        return reading

    async def _read(self, stores: SqlStores, key: tuple[str | None, str | None]) -> RoleOverrides:
        try:
            read_at = self._clock()
            overrides = await stores.overrides(*key)
        finally:
            self._reading.pop(key, None)
        self._entries[key] = (read_at, overrides)
        self._entries.move_to_end(key)
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)
        return overrides


def _retrieved(task: asyncio.Task[Any]) -> None:
    """An early read nobody came for: its error is the reader's to log when it asks, not asyncio's."""
    if not task.cancelled():
        task.exception()


class EarlyHistory:
    """A `HistoryStore` whose one expected read (`conversation_key`, `session_id`, `limit`) was
    started before the run asks for it, beside the checks that decide whether the run starts at
    all; any other read goes to `store`. `discard` when the run does not start."""

    def __init__(self, store: SqlStores, conversation_key: str, session_id: str | None, limit: int) -> None:
        self._store = store
        self._expected: tuple[str, str | None, int] | None = (conversation_key, session_id, limit)
        self._read = asyncio.create_task(store.recent(conversation_key, session_id, limit))
        self._read.add_done_callback(_retrieved)

    async def recent(self, conversation_key: str, session_id: str | None, limit: int) -> list[StoredMessage]:
        if (conversation_key, session_id, limit) == self._expected:
            self._expected = None  # answered once: a later read is a read of its own
            return await self._read
        return await self._store.recent(conversation_key, session_id, limit)

    def discard(self) -> None:
        self._read.cancel()


class NoHistory:
    """The history of a session no run has used yet: nothing, without asking the database."""

    async def recent(self, conversation_key: str, session_id: str | None, limit: int) -> list[StoredMessage]:
        return []


class _CachedRoles:
    """A `RoleStore` for one run context, answered from the cache."""

    def __init__(self, cache: RoleCache, stores: SqlStores) -> None:
        self._cache, self._stores = cache, stores

    async def overrides(self, user_id: str | None, team_id: str | None) -> RoleOverrides:
        return await self._cache.get(self._stores, user_id, team_id)
