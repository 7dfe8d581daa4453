"""The runner's own database reads: history rows and role overrides.

Read-only: persistence writes `messages`; `role_settings` is written by admins
(CLI / SQL). Each read is one short session.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.db.models import Message
from agentstream.db.models_runner import RoleSetting
from agentstream_runner.connectors import RoleOverrides
from agentstream_runner.history import StoredMessage


class SqlStores:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def recent(self, conversation_key: str, session_id: str | None, limit: int) -> list[StoredMessage]:
        if limit <= 0:
            return []
        query = select(Message.role, Message.content, Message.name).where(Message.conversation_key == conversation_key)
        if session_id is not None:
            query = query.where(Message.session_id == session_id)
        query = query.order_by(Message.id.desc()).limit(limit)
        async with self._sessions() as session:
            rows = (await session.execute(query)).all()
        return [StoredMessage(role=r.role, content=r.content or "", name=r.name) for r in reversed(rows)]

    async def overrides(self, user_id: str | None, team_id: str | None) -> RoleOverrides:
        subjects = [("user", user_id), ("team", team_id)]
        wanted = [(scope, sid) for scope, sid in subjects if sid]
        if not wanted:
            return RoleOverrides()
        found: dict[str, dict[str, str]] = {"user": {}, "team": {}}
        async with self._sessions() as session:
            for scope, subject in wanted:
                rows = await session.execute(
                    select(RoleSetting.role, RoleSetting.connector_id)
                    .where(RoleSetting.scope == scope, RoleSetting.subject_id == subject)
                )
                found[scope] = {r.role: r.connector_id for r in rows}
        return RoleOverrides(user=found["user"], team=found["team"])
