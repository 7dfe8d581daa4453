"""Sessions outside a transaction (`autocommitting`) hand their connection back as they found it:
the next plain session on it is a transaction again, on both engines."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import create_async_engine

from agentstream.db import session_factory, upgrade
from agentstream.db.models_persistence import ChatSession
from agentstream.db.session import autocommitting

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _open_sessions(sessions) -> int:  # type: ignore[no-untyped-def]
    async with sessions() as s:
        return int(await s.scalar(select(func.count()).select_from(ChatSession)) or 0)


async def test_a_plain_session_after_an_autocommitting_one_on_the_same_connection_still_rolls_back(db_url):  # type: ignore[no-untyped-def]
    await upgrade(db_url)
    engine = create_async_engine(db_url, pool_size=1, max_overflow=0)  # one connection: the same one reused
    try:
        sessions = session_factory(engine)
        single = autocommitting(sessions)
        async with single() as s:  # on PostgreSQL, outside a transaction (the commit has nothing to do)
            s.add(ChatSession(session_id="kept", conversation_key="web:a", started_at=T0))
            await s.commit()
        assert await _open_sessions(sessions) == 1
        async with sessions() as s:  # a transaction again: rolled back, nothing written
            s.add(ChatSession(session_id="dropped", conversation_key="web:b", started_at=T0))
            await s.flush()
            await s.rollback()
        assert await _open_sessions(sessions) == 1
        if engine.dialect.name == "sqlite":
            assert single is sessions  # unchanged: no transaction is started for a read there
    finally:
        await engine.dispose()
