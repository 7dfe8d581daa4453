"""The `tool_calls` store on both engines: a call is claimed once, its stored result comes back;
calls that arrive together share their transactions, and a result rides with the next claim."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream.db import create_engine, upgrade
from agentstream.db.models_tools import ToolCallState
from agentstream_tools import call_store
from agentstream_tools.call_store import ToolCallStore
from agentstream_tools.executor import answer


def request(call_id: str = "c1", tool: str = "counter", run_id: str = "r1") -> ToolCallRequest:
    return ToolCallRequest(
        run_id=run_id, root_run_id=run_id, conversation_key="web:a", call_id=call_id, tool=tool, arguments="{}"
    )


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield engine
    await engine.dispose()


async def test_a_call_is_claimed_once_and_its_stored_result_comes_back(engine):  # type: ignore[no-untyped-def]
    store = ToolCallStore(engine)
    call = request(run_id="r" * 64)  # the longest run id the contract allows: still claimable
    assert await store.claim(call) is None
    assert await store.claim(call) is ToolCallState.RUNNING  # claimed, never finished
    result = ToolCallResult(
        run_id=call.run_id,
        root_run_id=call.run_id,
        conversation_key="web:a",
        call_id="c1",
        tool="counter",
        ok=True,
        content="1",
        duration_ms=3.0,
    )
    await store.finish(call, result)
    assert await store.claim(call) == result  # the very record, ids included
    row = await store.get(call.idempotency_key)
    assert row is not None and (row.state, row.run_id, row.call_id, row.tool) == ("done", call.run_id, "c1", "counter")
    assert row.finished_at is not None and row.finished_at >= row.started_at
    assert await store.claim(request(call_id="c2", run_id=call.run_id)) is None  # another call of the run


def result_of(call: ToolCallRequest, content: str = "ok") -> ToolCallResult:
    return answer(call, ok=True, content=content)


def count_commits(store: ToolCallStore) -> list[int]:
    commits = [0]

    @event.listens_for(store.writes, "commit")
    def counted(_conn):  # type: ignore[no-untyped-def]
        commits[0] += 1

    return commits


async def test_calls_claimed_and_finished_together_share_their_transactions(engine):  # type: ignore[no-untyped-def]
    store = ToolCallStore(engine)
    calls = [request(call_id=f"c{i}", run_id="batch") for i in range(50)]
    commits = count_commits(store)
    assert await asyncio.gather(*(store.claim(c) for c in calls)) == [None] * 50
    assert 1 <= commits[0] <= 2  # the first claim's transaction, then the 49 queued meanwhile
    commits[0] = 0
    results = [result_of(c, c.call_id) for c in calls]
    await asyncio.gather(*(store.finish(c, r) for c, r in zip(calls, results, strict=True)))
    assert 1 <= commits[0] <= 2
    assert await asyncio.gather(*(store.claim(c) for c in calls)) == results  # each call its own result


async def test_the_same_call_twice_in_one_batch_is_claimed_once(engine):  # type: ignore[no-untyped-def]
    store = ToolCallStore(engine)
    first, second = await asyncio.gather(store.claim(request()), store.claim(request()))
    assert (first, second) == (None, ToolCallState.RUNNING)


async def test_a_claim_behind_its_calls_result_in_one_batch_gets_that_result(engine):  # type: ignore[no-untyped-def]
    store = ToolCallStore(engine)
    call = request()
    result = result_of(call)
    assert await store.claim(call) is None
    _, replayed = await asyncio.gather(store.finish(call, result), store.claim(call))
    assert replayed == result


async def test_a_failed_transaction_fails_each_of_its_calls_and_the_next_one_works(engine):  # type: ignore[no-untyped-def]
    store = ToolCallStore(engine)
    failing = [True]

    @event.listens_for(store.writes, "before_cursor_execute")
    def away(*_args):  # type: ignore[no-untyped-def]
        if failing[0] and "tool_calls" in str(_args[2]):
            raise ConnectionError("database away")

    outcomes = await asyncio.gather(store.claim(request("a")), store.claim(request("b")), return_exceptions=True)
    assert [type(o) for o in outcomes] == [ConnectionError, ConnectionError]
    failing[0] = False
    assert await asyncio.gather(store.claim(request("a")), store.claim(request("b"))) == [None, None]


async def test_a_caller_cancelled_while_its_batch_is_written_leaves_the_others_their_answers(engine):  # type: ignore[no-untyped-def]
    store = ToolCallStore(engine)
    gone = asyncio.create_task(store.claim(request("gone")))
    kept = asyncio.create_task(store.claim(request("kept")))
    await asyncio.sleep(0)  # both queued, the writer started
    gone.cancel()
    assert await kept is None
    assert gone.cancelled()
    assert await store.claim(request("kept")) is ToolCallState.RUNNING


async def test_a_result_waits_for_the_next_claim_and_rides_in_its_transaction(engine, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(call_store, "RESULT_WAIT_S", 3600.0)  # only a claim (or close) can write it
    store = ToolCallStore(engine)
    done, call = request("done"), request("next")
    assert await store.claim(done) is None
    commits = count_commits(store)
    stored = result_of(done)
    finishing = asyncio.create_task(store.finish(done, stored))
    await asyncio.sleep(0.05)
    assert not finishing.done() and commits[0] == 0  # queued: no transaction of its own
    assert await store.claim(call) is None
    await finishing
    assert commits[0] == 1  # the claim's transaction stored the result too
    assert await store.claim(done) == stored
    await store.close()


async def test_a_result_alone_is_stored_at_once_when_asked_or_on_close(engine, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(call_store, "RESULT_WAIT_S", 3600.0)
    store = ToolCallStore(engine)
    first, last = request("first"), request("last")
    assert await asyncio.gather(store.claim(first), store.claim(last)) == [None, None]
    await store.finish(first, result_of(first), at_once=True)  # what the bench's lone call measures
    finishing = asyncio.create_task(store.finish(last, result_of(last)))
    await asyncio.sleep(0)
    await store.close()  # the executor stopping: nothing queued is left behind
    await finishing
    rows = [await store.get(c.idempotency_key) for c in (first, last)]
    assert [row.state if row is not None else None for row in rows] == [ToolCallState.DONE] * 2


async def test_a_result_alone_is_stored_after_its_wait(engine, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(call_store, "RESULT_WAIT_S", 0.0)
    store = ToolCallStore(engine)
    call = request()
    assert await store.claim(call) is None
    stored = result_of(call)
    await store.finish(call, stored)  # no claim comes: the timer writes it
    assert await store.claim(call) == stored
