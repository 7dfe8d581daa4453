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


class CountingStore:
    """A SessionStore that counts its transactions and can be told to fail."""

    def __init__(self, sessions) -> None:  # type: ignore[no-untyped-def]
        from agentstream_runner.chat_sessions import SessionStore

        self.inner, self.batches, self.fail = SessionStore(sessions), [], False

    async def current_many(self, keys):  # type: ignore[no-untyped-def]
        self.batches.append(list(keys))
        if self.fail:
            raise RuntimeError("database down")
        return await self.inner.current_many(keys)

    async def reset(self, key):  # type: ignore[no-untyped-def]
        return await self.inner.reset(key)


async def test_new_conversations_asked_together_are_resolved_in_one_batch(sessions):
    import asyncio

    from agentstream_runner.chat_sessions import KnownSessions, SessionStore

    store, known = CountingStore(sessions), KnownSessions()
    existing = await SessionStore(sessions).current("web:old")
    keys = ["web:old", *(f"web:n{i}" for i in range(30)), "web:n0"]
    got = await asyncio.gather(*(known.current(store, k) for k in keys))  # type: ignore[arg-type]
    # Asked in the same loop turn: one transaction for all 31 conversations.
    assert [len(b) for b in store.batches] == [31]
    assert got[0] == existing and got[1] == got[-1]  # the same conversation twice: one session
    assert len(set(got)) == 31
    for key, session_id in zip(keys, got, strict=True):
        assert await SessionStore(sessions).current(key) == session_id  # stored, and open
    await known.current(store, "web:n5")  # known now: no transaction
    assert len(store.batches) == 1
    # Asked while a batch is in the database: they wait for it, then go together.
    first = asyncio.create_task(known.current(store, "web:m0"))
    await asyncio.sleep(0)  # its batch has started
    rest = await asyncio.gather(*(known.current(store, f"web:m{i}") for i in range(1, 6)))
    assert await first and all(rest)
    assert [len(b) for b in store.batches] == [31, 1, 5]


async def test_a_failed_batch_fails_its_waiters_and_the_next_one_works(sessions):
    import asyncio

    from agentstream_runner.chat_sessions import KnownSessions

    store, known = CountingStore(sessions), KnownSessions()
    store.fail = True
    results = await asyncio.gather(
        *(known.current(store, f"web:f{i}") for i in range(5)),  # type: ignore[arg-type]
        return_exceptions=True,
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    store.fail = False
    assert await known.current(store, "web:f1")  # type: ignore[arg-type]


async def test_a_reset_during_a_batch_is_not_overwritten_by_it(sessions):
    import asyncio

    from agentstream_runner.chat_sessions import KnownSessions, SessionStore

    store, known = CountingStore(sessions), KnownSessions()
    first = await known.current(store, "web:r")  # type: ignore[arg-type]
    known.forget_all()
    asking = asyncio.create_task(known.current(store, "web:r"))  # type: ignore[arg-type]
    new = await known.reset(store, "web:r")  # type: ignore[arg-type]
    assert await asking in (first, new)
    # Whatever the order, what the runner keeps is what the database says is open.
    assert await known.current(store, "web:r") == await SessionStore(sessions).current("web:r") == new  # type: ignore[arg-type]
