"""History sessions on both engines: a reset opens a new one; known sessions read once, in batches."""

from __future__ import annotations

import pytest

from agentstream.db import create_engine, session_factory, upgrade
from agentstream_runner.chat_sessions import SessionStore


@pytest.fixture
async def sessions(db_url):  # type: ignore[no-untyped-def]
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


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


async def test_a_conversation_keeps_its_session_until_reset(db_url):
    await upgrade(db_url)
    engine = create_engine(db_url)
    try:
        store = SessionStore(session_factory(engine))
        first = await store.current("web:c1")
        assert await store.current("web:c1") == first
        assert await store.current("web:c2") != first
        new = await store.reset("web:c1")
        assert new != first and await store.current("web:c1") == new
    finally:
        await engine.dispose()


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


async def test_a_session_opened_here_is_new_to_the_first_run_that_takes_it_only(sessions):
    import asyncio

    from agentstream_runner.chat_sessions import KnownSessions, SessionStore

    store, known = SessionStore(sessions), KnownSessions()
    existing = await SessionStore(sessions).current("web:old")  # opened before this runner
    old, fresh, fresh_again = await asyncio.gather(
        known.current(store, "web:old"), known.current(store, "web:fresh"), known.current(store, "web:fresh")
    )
    assert old == existing and not known.take_new(old)  # may hold messages: its history is read
    assert fresh == fresh_again and known.take_new(fresh)
    assert not known.take_new(fresh)  # the next run of the conversation reads its history
    after_reset = await known.reset(store, "web:old")
    assert known.take_new(after_reset)
    unused = await known.reset(store, "web:old")
    known.forget_all()  # the partition moved: its next owner may have used it
    assert not known.take_new(unused)


async def test_the_newest_open_session_is_the_current_one_and_none_is_opened_beside_it(sessions):
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import func, select

    from agentstream.db.models_persistence import ChatSession
    from agentstream_runner.chat_sessions import SessionStore

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    async with sessions() as s, s.begin():
        s.add_all(
            [
                ChatSession(session_id="older", conversation_key="web:a", started_at=t0),
                ChatSession(session_id="newer", conversation_key="web:a", started_at=t0 + timedelta(seconds=1)),
                ChatSession(session_id="ended", conversation_key="web:b", started_at=t0, ended_at=t0),
            ]
        )
    resolved = await SessionStore(sessions).current_many(["web:a", "web:b", "web:a"])
    assert resolved.ids["web:a"] == "newer" and resolved.ids["web:b"] not in ("ended", "newer")
    assert resolved.opened == frozenset({resolved.ids["web:b"]})
    async with sessions() as s:
        open_b = await s.scalar(
            select(func.count()).where(ChatSession.conversation_key == "web:b", ChatSession.ended_at.is_(None))
        )
    assert open_b == 1
