"""What agentstream.kafka.internals reaches in aiokafka and FastStream is still there and still
behaves as assumed: each test fails if an upgrade renames or changes what it relies on."""

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.consumer.group_coordinator import GroupCoordinator
from aiokafka.errors import CommitFailedError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import BatchBuilder
from faststream import AckPolicy
from faststream.kafka import KafkaBroker

from agentstream.kafka.internals import (
    consumer_of,
    consumers_of,
    detach_consumer,
    fail_queued,
    has_consumer_subgroup,
    hold_commits,
    partition_of_key,
    poll_batches_at_once,
    producer_of,
    record_batch,
    refresh_metadata,
    refuse_sends,
    release_commits,
    restore_sends,
)

UNREACHABLE = "127.0.0.1:1"  # nothing connects in these tests: the clients are never started


async def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


@pytest.fixture
async def new_consumer() -> AsyncIterator[Callable[[], AIOKafkaConsumer]]:
    """Consumers never started, closed after the test (aiokafka warns about unclosed ones)."""
    made: list[AIOKafkaConsumer] = []

    def make() -> AIOKafkaConsumer:
        made.append(AIOKafkaConsumer(bootstrap_servers=UNREACHABLE))
        return made[-1]

    yield make
    for consumer in made:
        vars(consumer).pop("stop", None)
        vars(consumer).pop("commit", None)
        consumer._coordinator = None  # a stand-in of a test
        await consumer.stop()


@pytest.fixture
async def new_producer() -> AsyncIterator[Callable[..., AIOKafkaProducer]]:
    made: list[AIOKafkaProducer] = []

    def make(**options: Any) -> AIOKafkaProducer:
        made.append(AIOKafkaProducer(bootstrap_servers=UNREACHABLE, **options))
        return made[-1]

    yield make
    for producer in made:
        vars(producer).pop("stop", None)
        await producer.stop()


async def test_producer_of_is_the_producer_faststream_connected(new_producer: Callable[..., AIOKafkaProducer]) -> None:
    broker = KafkaBroker(UNREACHABLE)
    with pytest.raises(RuntimeError):
        producer_of(broker)  # not started: no producer
    producer = new_producer()
    producer.start = _nothing  # type: ignore[method-assign]
    producer.stop = _nothing  # type: ignore[method-assign]
    await broker.config.producer.connect(producer, serializer=None)
    assert producer_of(broker) is producer
    await broker.config.producer.disconnect()
    with pytest.raises(RuntimeError):
        producer_of(broker)


async def test_record_batch_holds_more_than_the_producers_batch_size(
    new_producer: Callable[..., AIOKafkaProducer],
) -> None:
    producer = new_producer(max_batch_size=16 * 1024)
    value = b"x" * 1024
    own = producer.create_batch()
    big = record_batch(producer, 64 * 1024)
    assert type(big) is type(own) is BatchBuilder
    own_count = big_count = 0
    while own.append(key=b"k", value=value, timestamp=None, headers=[]) is not None:
        own_count += 1
    while big.append(key=b"k", value=value, timestamp=None, headers=[]) is not None:
        big_count += 1
    assert own_count < 16 < 48 < big_count < 64


async def test_record_batch_keeps_aiokafkas_own_with_serializers(new_producer: Callable[..., AIOKafkaProducer]) -> None:
    producer = new_producer(value_serializer=lambda v: v)
    batch = record_batch(producer, 64 * 1024)
    assert batch.append(key=None, value=b"x" * 20_000, timestamp=None, headers=[]) is not None
    assert batch.append(key=None, value=b"x" * 20_000, timestamp=None, headers=[]) is None  # 16 KiB default


def test_partition_of_key_is_where_the_default_partitioner_sends_a_keyed_record() -> None:
    partitioner = DefaultPartitioner()
    for count in (1, 3, 8):
        partitions = list(range(count))
        for i in range(200):
            key = f"telegram:chat-{i}".encode()
            assert partition_of_key(key, partitions) == partitioner(key, partitions, partitions)


async def test_a_subscribers_consumer_is_found_and_detached_without_being_stopped(
    new_consumer: Callable[[], AIOKafkaConsumer],
) -> None:
    broker = KafkaBroker(UNREACHABLE)
    subscriber = broker.subscriber("t", group_id="g")
    assert consumer_of(subscriber) is None and consumers_of(subscriber) == []
    assert not has_consumer_subgroup(subscriber)
    consumer = new_consumer()
    stopped: list[object] = []

    async def stop() -> None:
        stopped.append(consumer)

    consumer.stop = stop  # type: ignore[method-assign]
    subscriber.consumer = consumer
    assert consumer_of(subscriber) is consumer and consumers_of(subscriber) == [consumer]
    assert detach_consumer(subscriber) is consumer
    assert subscriber.consumer is None
    await subscriber.stop()  # FastStream stops only the consumer it still has
    assert stopped == []
    subscriber.consumer = consumer
    await subscriber.stop()
    assert stopped == [consumer] and subscriber.consumer is None


async def test_a_concurrent_subscribers_consumers_are_its_subgroup(
    new_consumer: Callable[[], AIOKafkaConsumer],
) -> None:
    broker = KafkaBroker(UNREACHABLE)
    subscriber = broker.subscriber("t", group_id="g", max_workers=2, ack_policy=AckPolicy.MANUAL)
    assert hasattr(subscriber, "consumer_subgroup")
    one, two = new_consumer(), new_consumer()
    subscriber.consumer_subgroup = [one, two]
    assert has_consumer_subgroup(subscriber)
    assert consumers_of(subscriber) == [one, two]


async def test_held_commits_fail_and_auto_commit_is_off_until_released(
    new_consumer: Callable[[], AIOKafkaConsumer],
) -> None:
    consumer = new_consumer()
    assert hasattr(consumer, "_coordinator")  # None until started; a GroupCoordinator with a group
    consumer._coordinator = SimpleNamespace(_enable_auto_commit=True)
    hold_commits(consumer)
    hold_commits(consumer)  # twice: the saved setting stays the original one
    with pytest.raises(CommitFailedError):
        await consumer.commit()
    assert consumer._coordinator._enable_auto_commit is False
    release_commits(consumer)
    assert consumer._coordinator._enable_auto_commit is True
    assert consumer.commit.__func__ is AIOKafkaConsumer.commit  # the class's own again


async def test_the_coordinator_commits_automatically_only_while_enabled() -> None:
    assert "self._enable_auto_commit = enable_auto_commit" in inspect.getsource(GroupCoordinator.__init__)
    commits: list[object] = []

    async def commit_offsets(*args: Any) -> None:
        commits.append(args)

    disabled = SimpleNamespace(_enable_auto_commit=False, commit_offsets=commit_offsets, _do_commit_offsets=commits)
    assignment = SimpleNamespace(all_consumed_offsets=dict)
    assert await GroupCoordinator._maybe_do_autocommit(disabled, assignment) is None
    await GroupCoordinator._maybe_do_last_autocommit(disabled, assignment)
    assert commits == []
    enabled = SimpleNamespace(_enable_auto_commit=True, commit_offsets=commit_offsets)
    await GroupCoordinator._maybe_do_last_autocommit(enabled, assignment)
    assert len(commits) == 1


async def test_refresh_metadata_asks_the_consumers_client(new_consumer: Callable[[], AIOKafkaConsumer]) -> None:
    consumer = new_consumer()
    assert isinstance(consumer._client, AIOKafkaClient)
    assert callable(AIOKafkaClient.force_metadata_update)
    asked: list[bool] = []

    async def force_metadata_update() -> None:
        asked.append(True)

    consumer._client.force_metadata_update = force_metadata_update
    await refresh_metadata(consumer)
    assert asked == [True]


async def test_queued_batches_fail_and_sends_are_refused_until_restored(
    new_producer: Callable[..., AIOKafkaProducer],
) -> None:
    producer = new_producer()
    accumulator = producer._message_accumulator
    queued = await accumulator.add_message(TopicPartition("t", 0), b"k", b"v", timeout=1)
    assert fail_queued(producer, RuntimeError("held")) == 1
    assert not accumulator._batches
    with pytest.raises(RuntimeError, match="held"):
        await queued

    refuse_sends(producer, lambda: RuntimeError("refused"))
    with pytest.raises(RuntimeError, match="refused"):
        await producer.send("t", b"v")
    with pytest.raises(RuntimeError, match="refused"):
        await producer.send_batch(producer.create_batch(), "t", partition=0)
    retried = await accumulator.add_message(TopicPartition("t", 1), b"k", b"v", timeout=1)
    (batch,) = accumulator._batches.pop(TopicPartition("t", 1))
    accumulator.reenqueue(batch)  # a failed request: fails instead of going back in the queue
    with pytest.raises(RuntimeError, match="refused"):
        await retried
    assert not accumulator._batches

    restore_sends(producer)
    assert "send" not in vars(producer) and "send_batch" not in vars(producer)
    assert "reenqueue" not in vars(accumulator)
    assert type(producer).send is AIOKafkaProducer.send


async def test_a_batch_consume_loop_polls_again_at_once_after_an_empty_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # FastStream's own get_msg sleeps after an empty poll
        slept.append(seconds)

    monkeypatch.setattr(anyio, "sleep", sleep)
    broker = KafkaBroker(UNREACHABLE)
    subscriber: Any = broker.subscriber("t", group_id="g", batch=True, batch_timeout_ms=200, max_records=7)
    polls: list[tuple[int, int | None]] = []
    handled: list[Any] = []
    record = SimpleNamespace(value=b"x")

    async def getmany(timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, Any]:
        polls.append((timeout_ms, max_records))
        return {} if len(polls) == 1 else {TopicPartition("t", 0): [record]}

    async def consume_one(msg: Any) -> None:
        handled.append(msg)
        subscriber.running = False

    poll_batches_at_once(subscriber)
    subscriber.consume_one = consume_one
    subscriber.running = True
    await asyncio.wait_for(subscriber._run_consume_loop(SimpleNamespace(getmany=getmany)), 10)
    # FastStream's own get_msg would have slept 200 ms after the empty poll
    assert polls == [(200, 7), (200, 7)] and handled == [(record,)] and slept == []
