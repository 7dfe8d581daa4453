"""PostgreSQL connections lost while pooled: the checkout ping replaces an idle one; a connection
used moments ago is not pinged, and its failure replaces the whole pool."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agentstream.db.session import ping_when_idle


async def _backend_pid(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate(admin: AsyncEngine, pid: int) -> None:
    """What a database restart does to a pooled connection: its backend is gone."""
    async with admin.connect() as conn:
        assert (await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})).scalar_one()


async def test_an_idle_connection_lost_in_the_pool_is_replaced_and_a_busy_one_fails_once(db_url):  # type: ignore[no-untyped-def]
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has no connection to lose")
    now = [0.0]
    engine = create_async_engine(db_url, pool_size=1, max_overflow=0)
    ping_when_idle(engine.sync_engine, 10.0, clock=lambda: now[0])
    admin = create_async_engine(db_url, poolclass=None)
    try:
        first = await _backend_pid(engine)
        assert await _backend_pid(engine) == first  # the pool's one connection, reused
        await _terminate(admin, first)
        now[0] += 11.0  # idle longer than 10 s: pinged on checkout, found lost, replaced
        second = await _backend_pid(engine)
        assert second != first

        await _terminate(admin, second)
        now[0] += 1.0  # used a second ago: not pinged, its statement fails
        with pytest.raises(DBAPIError) as failed:
            await _backend_pid(engine)
        assert failed.value.connection_invalidated
        third = await _backend_pid(engine)  # the next checkout has a new connection
        assert third not in (first, second)
    finally:
        await engine.dispose()
        await admin.dispose()
