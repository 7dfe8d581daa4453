"""The tool-executor's handler: each (run_id, call_id) runs at most once; a redelivered call is
replayed or refused (the executor died in it); offsets wait for the oldest unanswered call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from agentstream.config import load_settings
from agentstream.contracts import DeadLetter, ToolCallRequest, ToolCallResult
from agentstream.db import create_engine, upgrade
from agentstream.db.models_tools import ToolCallState
from agentstream.kafka.topics import DLQ, TOOL_RESULTS, Topic
from agentstream_testing.signed_calls import signed
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from agentstream_tools.call_store import STOPPED_DURING_CALL, ToolCallStore
from agentstream_tools.registry import Tool

COUNTER_SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}


def request(call_id: str = "c1", tool: str = "counter", run_id: str = "r1") -> ToolCallRequest:
    return signed(
        ToolCallRequest(
            run_id=run_id, root_run_id=run_id, conversation_key="web:a", call_id=call_id, tool=tool, arguments="{}"
        )
    )


def record(value: bytes, partition: int, offset: int) -> SimpleNamespace:
    """A `tool-calls` record as aiokafka hands it over."""
    return SimpleNamespace(
        topic="tool-calls", partition=partition, offset=offset, key=b"web:a", value=value, headers=[], timestamp=0
    )


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield engine
    await engine.dispose()


class Harness:
    """A tool-executor that is not started: records are handed to `on_calls`, results recorded."""

    def __init__(self, db_url: str, engine: AsyncEngine, gate: asyncio.Event | None = None):
        self.svc = bootstrap_tool_executor(load_settings(database={"url": db_url}), store=ToolCallStore(engine))
        self.published: list[ToolCallResult] = []
        self.dead_letters: list[DeadLetter] = []
        self.runs = 0

        async def counter(args: dict[str, Any]) -> str:
            self.runs += 1
            if gate is not None:
                await gate.wait()
            return f"run {self.runs}"

        async def publish(topic: Topic[Any], record: Any, key: str | None = None) -> None:
            if topic is DLQ:
                self.dead_letters.append(record)
                return
            assert topic is TOOL_RESULTS and key is None and topic.key_of(record) == "web:a"
            self.published.append(record)

        self.svc.tools.register(Tool("counter", "counts its runs", COUNTER_SCHEMA, counter))
        self.svc.runtime.publisher.publish = publish  # type: ignore[method-assign]  # results and dead letters alike

        def publish_batched(topic: Topic[Any], record: Any, key: str | None = None) -> asyncio.Future[None]:
            # Through `publish` as it is when called: a test that replaces it sees the results too.
            return asyncio.ensure_future(self.svc.runtime.publisher.publish(topic, record, key))

        self.svc.runtime.publisher.publish_batched = publish_batched  # type: ignore[method-assign]

    async def deliver(self, call: ToolCallRequest, offset: int, partition: int = 0) -> None:
        await self.deliver_batch([call], offset, partition)

    async def deliver_batch(self, calls: list[ToolCallRequest | bytes], first: int, partition: int = 0) -> None:
        """`calls` as one poll's records, at offsets from `first` (bytes: a record as it is)."""
        records = tuple(
            record(call if isinstance(call, bytes) else call.to_json(), partition, first + i)
            for i, call in enumerate(calls)
        )
        await self.svc.requests.handle(records)  # type: ignore[arg-type]

    async def settle(self) -> None:
        while self.svc._tasks:
            await asyncio.wait(set(self.svc._tasks))


async def test_a_redelivered_done_call_is_replayed_not_run_again(db_url, engine):  # type: ignore[no-untyped-def]
    first = Harness(db_url, engine)
    await first.deliver(request(), offset=4)
    await first.settle()
    [answer] = first.published
    assert (first.runs, answer.ok, answer.content) == (1, True, "run 1")
    assert first.svc.requests.points.due() == {0: 5}  # answered: committable

    restarted = Harness(db_url, engine)  # a crash before the commit: the record comes again
    await restarted.deliver(request(), offset=4)
    await restarted.settle()
    assert restarted.runs == 0 and restarted.published == [answer]
    assert restarted.svc.replays.labels("stored")._value.get() == 1
    assert restarted.svc.requests.points.due() == {0: 5}


async def test_a_call_the_executor_died_in_is_answered_as_interrupted(db_url, engine):  # type: ignore[no-untyped-def]
    await ToolCallStore(engine).claim(request())  # what a killed executor left behind
    restarted = Harness(db_url, engine)
    await restarted.deliver(request(), offset=0)
    await restarted.settle()
    [answer] = restarted.published
    assert restarted.runs == 0
    assert (answer.ok, answer.retryable, answer.error, answer.call_id) == (False, False, STOPPED_DURING_CALL, "c1")
    assert restarted.svc.replays.labels("stopped")._value.get() == 1
    assert restarted.svc.calls.labels("counter", "failed")._value.get() == 0  # nothing ran
    row = await ToolCallStore(engine).get(request().idempotency_key)
    assert row is not None and row.state == ToolCallState.DONE  # the answer is stored: nothing left running
    again = Harness(db_url, engine)
    await again.deliver(request(), offset=0)
    await again.settle()
    assert again.runs == 0 and again.published == [answer]  # the same answer, the same record


async def test_the_commit_waits_for_the_oldest_unanswered_call(db_url, engine):  # type: ignore[no-untyped-def]
    gate = asyncio.Event()
    h = Harness(db_url, engine, gate)
    await h.deliver(request("slow"), offset=10)
    await h.deliver(request("fast", tool="calculator"), offset=11)
    await asyncio.sleep(0.3)
    # the later call is answered, the earlier one still runs: nothing past offset 10 is committable
    assert [r.call_id for r in h.published] == ["fast"]
    assert h.svc.requests.points.due() == {0: 10}
    gate.set()
    await h.settle()
    assert h.svc.requests.points.due() == {0: 12}


async def test_a_redelivery_of_a_call_still_running_here_waits_for_it(db_url, engine):  # type: ignore[no-untyped-def]
    gate = asyncio.Event()
    h = Harness(db_url, engine, gate)
    await h.deliver(request(), offset=3)
    await asyncio.sleep(0.2)
    await h.deliver(request(), offset=3)  # the partition came back in a rebalance: read again
    await asyncio.sleep(0.2)
    assert h.published == [] and h.svc.replays.labels("stopped")._value.get() == 0
    gate.set()
    await h.settle()
    assert h.runs == 1 and [r.content for r in h.published] == ["run 1"]
    assert h.svc.requests.points.due() == {0: 4}


async def test_a_failing_database_is_retried_not_lost(db_url, engine):  # type: ignore[no-untyped-def]
    h = Harness(db_url, engine)
    real_finish, failures = h.svc.store.finish, []

    async def flaky_finish(call: ToolCallRequest, result: ToolCallResult) -> None:
        if len(failures) < 2:
            failures.append(call.call_id)
            raise ConnectionError("database away")
        await real_finish(call, result)

    h.svc.store.finish = flaky_finish  # type: ignore[method-assign]
    await h.deliver(request(), offset=0)
    await h.settle()
    assert failures == ["c1", "c1"] and h.runs == 1 and len(h.published) == 1
    assert await ToolCallStore(engine).claim(request()) == h.published[0]  # stored once published


async def test_the_result_is_published_before_it_is_stored_and_committed_after(db_url, engine):  # type: ignore[no-untyped-def]
    h = Harness(db_url, engine)
    storing, stored, release, real_finish = asyncio.Event(), asyncio.Event(), asyncio.Event(), h.svc.store.finish

    async def slow_finish(call: ToolCallRequest, result: ToolCallResult) -> None:
        storing.set()
        await release.wait()
        await real_finish(call, result)
        stored.set()

    h.svc.store.finish = slow_finish  # type: ignore[method-assign]
    await h.deliver(request(), offset=7)
    await asyncio.wait_for(storing.wait(), 5)
    assert [r.content for r in h.published] == ["run 1"]  # out before its store finished
    assert h.svc.requests.points.due() == {0: 7}  # but not committable: a crash now must read it again
    assert await ToolCallStore(engine).claim(request()) is ToolCallState.RUNNING  # what that redelivery finds
    release.set()
    await h.settle()
    assert stored.is_set() and h.svc.requests.points.due() == {0: 8}
    assert await ToolCallStore(engine).claim(request()) == h.published[0]


async def test_a_call_to_a_tool_not_served_is_counted_under_unknown_not_its_name(db_url, engine):  # type: ignore[no-untyped-def]
    harness = Harness(db_url, engine)
    await harness.deliver(request("c1"), offset=0)
    await harness.deliver(request("c2", tool="made-up-by-the-model"), offset=1)
    await harness.settle()
    registry = harness.svc.registry
    assert registry.get_sample_value("agentstream_tool_calls_total", {"tool": "counter", "outcome": "ok"}) == 1
    calls = [s for m in registry.collect() if m.name == "agentstream_tool_calls" for s in m.samples]
    counted = {(s.labels["tool"], s.labels["outcome"]): s.value for s in calls if s.name.endswith("_total")}
    assert {tool for tool, _ in counted} == {"counter", "unknown"}
    assert sum(value for (tool, _), value in counted.items() if tool == "unknown") == 1


# -- records polled together -------------------------------------------------------------
async def test_a_batch_replays_its_redelivered_call_and_runs_its_new_one(db_url, engine):  # type: ignore[no-untyped-def]
    first = Harness(db_url, engine)
    await first.deliver(request("c1"), offset=0)
    await first.settle()
    [stored] = first.published

    restarted = Harness(db_url, engine)  # c1 read again, in the same poll as a new call
    await restarted.deliver_batch([request("c1"), request("c2")], first=0)
    await restarted.settle()
    by_call = {r.call_id: r for r in restarted.published}
    assert restarted.runs == 1 and by_call["c1"] == stored and by_call["c2"].content == "run 1"
    assert restarted.svc.replays.labels("stored")._value.get() == 1
    assert restarted.svc.requests.points.due() == {0: 2}


async def test_a_batch_claims_its_calls_together_and_a_failed_claim_runs_and_publishes_nothing(db_url, engine):  # type: ignore[no-untyped-def]
    h = Harness(db_url, engine)
    real_transaction, transactions, failing = h.svc.store._transaction, [], [True]

    async def transaction(batch: Any) -> Any:
        transactions.append(sorted((p.request.call_id, p.result is None) for p in batch))
        if failing[0]:
            raise ConnectionError("database away")
        return await real_transaction(batch)

    h.svc.store._transaction = transaction  # type: ignore[method-assign]
    await h.deliver_batch([request("c1"), request("c2"), request("c3")], first=0)
    await asyncio.sleep(0.1)  # the claim failed and is being retried
    assert h.runs == 0 and h.published == [] and h.svc.requests.points.due() == {0: 0}
    assert transactions[0] == [("c1", True), ("c2", True), ("c3", True)]  # one transaction for the poll
    failing[0] = False
    await h.settle()
    assert h.runs == 3 and sorted(r.call_id for r in h.published) == ["c1", "c2", "c3"]
    assert h.svc.requests.points.due() == {0: 3}


async def test_an_undecodable_record_in_a_batch_is_dead_lettered_and_the_others_answered(db_url, engine):  # type: ignore[no-untyped-def]
    h = Harness(db_url, engine)
    await h.deliver_batch([request("c1"), b"{not json", request("c3")], first=5)
    await h.settle()
    assert sorted(r.call_id for r in h.published) == ["c1", "c3"] and h.runs == 2
    [letter] = h.dead_letters
    assert (letter.source_offset, letter.raw_value) == (6, "{not json") and letter.error.startswith("not valid JSON")
    assert h.svc.requests.points.due() == {0: 8}


async def test_a_call_twice_in_one_batch_runs_once_and_both_records_are_answered(db_url, engine):  # type: ignore[no-untyped-def]
    h = Harness(db_url, engine)
    await h.deliver_batch([request("c1"), request("c1")], first=0)
    await h.settle()
    assert h.runs == 1 and [r.content for r in h.published] == ["run 1"]
    assert h.svc.requests.points.due() == {0: 2}


async def test_a_record_that_fails_in_a_batch_fails_alone(db_url, engine):  # type: ignore[no-untyped-def]
    h = Harness(db_url, engine)
    answer = h.svc.runtime.publisher.publish

    async def publish(topic: Topic[Any], record: Any, key: str | None = None) -> None:
        if topic is DLQ:
            raise ConnectionError("broker away")  # the bad record's dead letter cannot go out
        await answer(topic, record, key)

    h.svc.runtime.publisher.publish = publish  # type: ignore[method-assign]
    await h.deliver_batch([request("c1"), b"{not json", request("c3")], first=0)
    await h.settle()
    assert h.runs == 2 and sorted(r.call_id for r in h.published) == ["c1", "c3"]
