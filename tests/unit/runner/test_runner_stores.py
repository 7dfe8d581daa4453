"""The runner's database reads on SQLite and PostgreSQL: history rows and role overrides."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models import Message
from agentstream.db.models_runner import RoleSetting
from agentstream_runner.history import StoredMessage
from agentstream_runner.stores import SqlStores

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def sessions(db_url):  # type: ignore[no-untyped-def]
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


def message(i: int, role: str, content: str, session: str = "s1", key: str = "web:c1") -> Message:
    return Message(conversation_key=key, session_id=session, root_run_id=f"r{i}", run_id=f"r{i}", seq=i, part=0,
                   role=role, content=content, name="clock" if role == "tool" else None, created_at=T0)


async def test_recent_messages_of_the_session_oldest_first(sessions):
    async with sessions() as s, s.begin():
        s.add_all([message(1, "user", "one"), message(2, "assistant", "two"), message(3, "tool", "t"),
                   message(4, "user", "four"), message(5, "user", "other session", session="s2"),
                   message(6, "user", "other chat", key="web:c2")])
    stores = SqlStores(sessions)
    assert await stores.recent("web:c1", "s1", 3) == [
        StoredMessage("assistant", "two"), StoredMessage("tool", "t", "clock"), StoredMessage("user", "four")]
    assert [m.content for m in await stores.recent("web:c1", None, 10)][-1] == "other session"
    assert await stores.recent("web:c1", "s1", 0) == []


async def test_role_overrides_for_user_and_team(sessions):
    async with sessions() as s, s.begin():
        s.add_all([
            RoleSetting(scope="user", subject_id="u1", role="fast", connector_id="mine", updated_at=T0),
            RoleSetting(scope="team", subject_id="t1", role="fast", connector_id="team-fast", updated_at=T0),
            RoleSetting(scope="team", subject_id="t1", role="default", connector_id="team-def", updated_at=T0),
            RoleSetting(scope="user", subject_id="u2", role="fast", connector_id="other", updated_at=T0),
        ])
    stores = SqlStores(sessions)
    found = await stores.overrides("u1", "t1")
    assert dict(found.user) == {"fast": "mine"} and dict(found.team) == {"fast": "team-fast", "default": "team-def"}
    none = await stores.overrides(None, None)
    assert dict(none.user) == {} and dict(none.team) == {}


async def test_role_overrides_are_read_once_per_ttl(sessions):
    from agentstream_runner.stores import RoleCache

    now = [100.0]
    cache = RoleCache(ttl_s=5.0, clock=lambda: now[0])
    roles = cache.over(SqlStores(sessions))
    async with sessions() as s, s.begin():
        s.add(RoleSetting(scope="user", subject_id="u1", role="default", connector_id="gpt", updated_at=T0))
    assert (await roles.overrides("u1", None)).user == {"default": "gpt"}
    async with sessions() as s, s.begin():
        s.add(RoleSetting(scope="user", subject_id="u1", role="fast", connector_id="mini", updated_at=T0))
    assert (await roles.overrides("u1", None)).user == {"default": "gpt"}  # within the TTL: the cached read
    now[0] += 5.0
    assert (await roles.overrides("u1", None)).user == {"default": "gpt", "fast": "mini"}


async def test_known_sessions_read_once_follow_resets_and_are_forgotten(sessions):
    from agentstream_runner.chat_sessions import KnownSessions, SessionStore

    store, known = SessionStore(sessions), KnownSessions(limit=2)
    first = await known.current(store, "web:a")
    await SessionStore(sessions).reset("web:a")  # written behind the runner's back (another owner)
    assert await known.current(store, "web:a") == first  # answered from memory
    known.forget_all()  # the partition moved: read again
    second = await known.current(store, "web:a")
    assert second != first
    assert await known.reset(store, "web:a") == await SessionStore(sessions).current("web:a")
    await known.current(store, "web:b")
    await known.current(store, "web:c")  # limit 2: web:a, the least recently used, is forgotten
    await SessionStore(sessions).reset("web:a")
    assert await known.current(store, "web:a") == await SessionStore(sessions).current("web:a")
