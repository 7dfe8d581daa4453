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
    return Message(
        conversation_key=key,
        session_id=session,
        root_run_id=f"r{i}",
        run_id=f"r{i}",
        seq=i,
        part=0,
        role=role,
        content=content,
        name="clock" if role == "tool" else None,
        created_at=T0,
    )


async def test_recent_messages_of_the_session_oldest_first(sessions):
    async with sessions() as s, s.begin():
        s.add_all(
            [
                message(1, "user", "one"),
                message(2, "assistant", "two"),
                message(3, "tool", "t"),
                message(4, "user", "four"),
                message(5, "user", "other session", session="s2"),
                message(6, "user", "other chat", key="web:c2"),
            ]
        )
    stores = SqlStores(sessions)
    assert await stores.recent("web:c1", "s1", 3) == [
        StoredMessage("assistant", "two"),
        StoredMessage("tool", "t", "clock"),
        StoredMessage("user", "four"),
    ]
    assert [m.content for m in await stores.recent("web:c1", None, 10)][-1] == "other session"
    assert await stores.recent("web:c1", "s1", 0) == []


async def test_history_without_a_run_leaves_out_that_runs_rows(sessions):
    async with sessions() as s, s.begin():
        s.add_all([message(1, "user", "one"), message(2, "assistant", "two"), message(3, "user", "three")])
    resumed = SqlStores(sessions, without_run="r2")  # the run being resumed stored its partial answer
    assert [m.content for m in await resumed.recent("web:c1", "s1", 10)] == ["one", "three"]
    assert [m.content for m in await SqlStores(sessions).recent("web:c1", "s1", 10)] == ["one", "two", "three"]


async def test_role_overrides_for_user_and_team(sessions):
    async with sessions() as s, s.begin():
        s.add_all(
            [
                RoleSetting(scope="user", subject_id="u1", role="fast", connector_id="mine", updated_at=T0),
                RoleSetting(scope="team", subject_id="t1", role="fast", connector_id="team-fast", updated_at=T0),
                RoleSetting(scope="team", subject_id="t1", role="default", connector_id="team-def", updated_at=T0),
                RoleSetting(scope="user", subject_id="u2", role="fast", connector_id="other", updated_at=T0),
                RoleSetting(scope="user", subject_id="t1", role="slow", connector_id="a-user-named-t1", updated_at=T0),
            ]
        )
    stores = SqlStores(sessions)
    found = await stores.overrides("u1", "t1")
    assert dict(found.user) == {"fast": "mine"} and dict(found.team) == {"fast": "team-fast", "default": "team-def"}
    only_user, only_team = await stores.overrides("u2", None), await stores.overrides(None, "t1")
    assert (dict(only_user.user), dict(only_user.team)) == ({"fast": "other"}, {})
    assert (dict(only_team.user), dict(only_team.team)) == ({}, {"fast": "team-fast", "default": "team-def"})
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
