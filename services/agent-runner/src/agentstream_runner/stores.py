"""The runner's own database reads: history rows and role overrides.

Read-only: persistence writes `messages`; `role_settings` is written by admins
(CLI / SQL). Each read is one short session; role overrides are cached briefly.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

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
    changes to `role_settings` take effect within `ttl_s`.
    """

    def __init__(self, ttl_s: float = 5.0, limit: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s, self._limit, self._clock = ttl_s, limit, clock
        self._entries: OrderedDict[tuple[str | None, str | None], tuple[float, RoleOverrides]] = OrderedDict()

    def over(self, stores: SqlStores) -> _CachedRoles:
        return _CachedRoles(self, stores)

    async def get(self, stores: SqlStores, user_id: str | None, team_id: str | None) -> RoleOverrides:
        key = (user_id, team_id)
        entry = self._entries.get(key)
        now = self._clock()
        if entry is not None and now - entry[0] < self._ttl_s:
            return entry[1]
        overrides = await stores.overrides(user_id, team_id)
        self._entries[key] = (now, overrides)
        self._entries.move_to_end(key)
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)
        return overrides


class _CachedRoles:
    """A `RoleStore` for one run context, answered from the cache."""

    def __init__(self, cache: RoleCache, stores: SqlStores) -> None:
        self._cache, self._stores = cache, stores

    async def overrides(self, user_id: str | None, team_id: str | None) -> RoleOverrides:
        return await self._cache.get(self._stores, user_id, team_id)
