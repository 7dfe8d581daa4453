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


async def test_reads_outside_a_transaction_see_what_they_would_in_one(sessions):
    from agentstream.db.session import autocommitting

    async with sessions() as s, s.begin():
        s.add_all([message(1, "user", "one"), message(2, "assistant", "two")])
        s.add(RoleSetting(scope="user", subject_id="u1", role="default", connector_id="gpt", updated_at=T0))
    stores = SqlStores(autocommitting(sessions))
    assert [m.content for m in await stores.recent("web:c1", "s1", 10)] == ["one", "two"]
    assert dict((await stores.overrides("u1", None)).user) == {"default": "gpt"}


class CountingStores(SqlStores):
    def __init__(self, sessions) -> None:  # type: ignore[no-untyped-def]
        super().__init__(sessions)
        self.reads: list[str] = []

    async def recent(self, conversation_key, session_id, limit):  # type: ignore[no-untyped-def]
        self.reads.append(f"history {conversation_key} {session_id} {limit}")
        return await super().recent(conversation_key, session_id, limit)

    async def overrides(self, user_id, team_id):  # type: ignore[no-untyped-def]
        self.reads.append(f"roles {user_id} {team_id}")
        return await super().overrides(user_id, team_id)


async def test_an_early_history_read_answers_the_run_once_and_other_reads_go_to_the_database(sessions):
    from agentstream_runner.stores import EarlyHistory

    async with sessions() as s, s.begin():
        s.add_all([message(1, "user", "one"), message(2, "assistant", "two")])
    stores = CountingStores(sessions)
    early = EarlyHistory(stores, "web:c1", "s1", 10)
    assert stores.reads == []  # started, not yet run
    assert [m.content for m in await early.recent("web:c1", "s1", 10)] == ["one", "two"]
    assert stores.reads == ["history web:c1 s1 10"]
    assert [m.content for m in await early.recent("web:c1", "s1", 1)] == ["two"]  # not the one expected
    assert [m.content for m in await early.recent("web:c1", "s1", 10)] == ["one", "two"]  # answered once only
    assert stores.reads == ["history web:c1 s1 10", "history web:c1 s1 1", "history web:c1 s1 10"]


async def test_an_early_history_read_that_fails_fails_the_read_that_asks_and_a_discarded_one_nobody(sessions):
    import asyncio

    from agentstream_runner.stores import EarlyHistory

    class Broken(SqlStores):
        async def recent(self, conversation_key, session_id, limit):  # type: ignore[no-untyped-def]
            raise RuntimeError("database down")

    early = EarlyHistory(Broken(sessions), "web:c1", "s1", 10)
    with pytest.raises(RuntimeError, match="database down"):
        await early.recent("web:c1", "s1", 10)
    discarded = EarlyHistory(Broken(sessions), "web:c1", "s1", 10)
    discarded.discard()
    await asyncio.sleep(0)  # no "exception never retrieved": the task is cancelled or retrieved


async def test_role_overrides_warmed_early_are_read_once_for_the_run_that_asks(sessions):
    import asyncio

    from agentstream_runner.stores import RoleCache

    async with sessions() as s, s.begin():
        s.add(RoleSetting(scope="user", subject_id="u1", role="default", connector_id="gpt", updated_at=T0))
    stores, cache = CountingStores(sessions), RoleCache()
    cache.warm(stores, "u1", "t1")
    cache.warm(stores, "u1", "t1")  # being read: not again
    got = await asyncio.gather(cache.get(stores, "u1", "t1"), cache.over(stores).overrides("u1", "t1"))
    assert [dict(g.user) for g in got] == [{"default": "gpt"}, {"default": "gpt"}]
    assert stores.reads == ["roles u1 t1"]
    cache.warm(stores, "u1", "t1")  # cached now
    assert stores.reads == ["roles u1 t1"]
