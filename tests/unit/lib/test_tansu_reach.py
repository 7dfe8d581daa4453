"""What agentstream.kafka.tansu_reach reaches in aiokafka and FastStream (for the Tansu flavor's
idle workarounds only) is still there and still behaves as assumed."""

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.consumer.group_coordinator import GroupCoordinator
from aiokafka.errors import KafkaError
from faststream.kafka import KafkaBroker

from agentstream.kafka.tansu_reach import FetchPosition, fetch_positions, on_append, poll_when, skip_repeated_commits

UNREACHABLE = "127.0.0.1:1"  # nothing connects in these tests: the clients are never started


@pytest.fixture
async def consumer() -> AsyncIterator[AIOKafkaConsumer]:
    made = AIOKafkaConsumer(bootstrap_servers=UNREACHABLE)
    yield made
    await made.stop()


async def test_fetch_positions_are_read_off_the_assignment_without_a_request(consumer: AIOKafkaConsumer) -> None:
    assert fetch_positions(consumer) == {}  # nothing assigned
    tp = TopicPartition("t", 0)
    consumer.assign([tp])
    assert fetch_positions(consumer) == {tp: FetchPosition(None, None, None)}  # nothing fetched yet
    state = consumer._subscription.subscription.assignment.state_value(tp)
    state.seek(5)
    state.highwater = 9
    state.timestamp = 1234
    assert fetch_positions(consumer) == {tp: FetchPosition(5, 9, 1234)}


async def test_on_append_reports_the_topic_of_every_record_the_producer_queues() -> None:
    producer = AIOKafkaProducer(bootstrap_servers=UNREACHABLE)  # never started: queuing needs no broker
    seen: list[str] = []
    on_append(producer, seen.append)
    on_append(producer, seen.append)  # twice: still one call per record
    accumulator = producer._message_accumulator
    await accumulator.add_message(TopicPartition("a", 0), b"k", b"v", timeout=1)
    batch = producer.create_batch()
    batch.append(key=b"k", value=b"v", timestamp=None)
    await accumulator.add_batch(batch, TopicPartition("b", 1), timeout=1)
    assert seen == ["a", "b"]
    assert accumulator._batches  # and aiokafka queued them


async def test_on_append_reports_a_record_acknowledged_once_the_broker_acked_it() -> None:
    producer = AIOKafkaProducer(bootstrap_servers=UNREACHABLE)
    queued: list[str] = []
    acked: list[str] = []
    on_append(producer, queued.append, acked.append)
    accumulator = producer._message_accumulator
    delivered = await accumulator.add_message(TopicPartition("a", 0), b"k", b"v", timeout=1)
    failed = await accumulator.add_message(TopicPartition("b", 0), b"k", b"v", timeout=1)
    await asyncio.sleep(0)
    assert queued == ["a", "b"] and acked == []  # queued, not on the broker yet
    accumulator._batches[TopicPartition("a", 0)][0].done(base_offset=0)
    accumulator._batches[TopicPartition("b", 0)][0].failure(exception=KafkaError())
    await asyncio.gather(delivered, failed, return_exceptions=True)
    await asyncio.sleep(0)
    assert acked == ["a"]  # a record the broker refused wakes nobody


async def test_repeated_commits_are_skipped_only_while_nothing_moved() -> None:
    sent: list[dict[TopicPartition, int]] = []

    class Coordinator:
        async def _do_commit_offsets(self, assignment: object, offsets: dict[TopicPartition, int]) -> None:
            sent.append(dict(offsets))

    class Consumer:
        _coordinator = Coordinator()

    consumer = Consumer()
    skip_repeated_commits(consumer)  # type: ignore[arg-type]
    skip_repeated_commits(consumer)  # type: ignore[arg-type]
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    commit = consumer._coordinator._do_commit_offsets
    await commit(None, {a: 1, b: 1})
    await commit(None, {a: 1, b: 1})
    await commit(None, {a: 2, b: 1})
    assert sent == [{a: 1, b: 1}, {a: 2}]
    assert hasattr(GroupCoordinator, "_do_commit_offsets")  # the reach


async def test_a_gated_consume_loop_polls_only_while_ready() -> None:
    broker = KafkaBroker(UNREACHABLE)
    subscriber: Any = broker.subscriber("t", group_id="g", batch=True, batch_timeout_ms=1)
    polls: list[int] = []

    async def getmany(timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, Any]:
        polls.append(timeout_ms)
        return {}

    consumer = SimpleNamespace(getmany=getmany)
    ready = asyncio.Event()
    poll_when(subscriber, ready.wait)
    poll_when(subscriber, ready.wait)  # wrapped once, whatever the calls
    subscriber.running = True
    loop = asyncio.create_task(subscriber._run_consume_loop(consumer))
    try:
        await asyncio.sleep(0.05)
        assert polls == []  # FastStream's own loop goes through get_msg: nothing polled while not ready
        ready.set()
        async with asyncio.timeout(10):  # polling again and again once ready (waiting, not timing it)
            while len(polls) <= 3:  # noqa: ASYNC110 - the consume loop's polls, no event to wait on
                await asyncio.sleep(0.01)
        ready.clear()
        await asyncio.sleep(0.01)
        before = len(polls)
        await asyncio.sleep(0.05)
        assert len(polls) == before
    finally:
        subscriber.running = False
        ready.set()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
