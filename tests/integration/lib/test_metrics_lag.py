"""Consumer lag read from the real broker: committed offsets against end offsets, batched
records counted whole (Tansu lists a partition's end as its last batch's base + 1), and the
committed offset's age (how old the oldest uncommitted record is)."""

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from prometheus_client import CollectorRegistry

from agentstream.metrics.lag import ConsumerLag, LagMetrics, Subscription, committed_age_s, lag_of
from agentstream.observability import get_logger

GROUP = "lag-test-group"


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def _produce_one_batch(bootstrap: str, topic: str, count: int, timestamps_ms: list[int] | None = None) -> None:
    """`count` records to partition 0, sent together so the producer writes them as one batch."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    await producer.start()
    try:
        at = timestamps_ms or [None] * count
        acks = [await producer.send(topic, f"r{i}".encode(), partition=0, timestamp_ms=at[i]) for i in range(count)]
        await asyncio.gather(*acks)
    finally:
        await producer.stop()


async def _commit(bootstrap: str, group: str, tp: TopicPartition, offset: int) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.commit({tp: offset})
    finally:
        await consumer.stop()


async def test_lag_is_end_minus_committed_with_batches_counted_whole(settings_factory, topics_created):
    settings = settings_factory()
    bootstrap = settings.kafka.bootstrap_servers
    topic = f"{topics_created}inbound"
    await _produce_one_batch(bootstrap, topic, 10)
    tp = TopicPartition(topic, 0)
    await _commit(bootstrap, f"{topics_created}{GROUP}", tp, 3)

    registry = CollectorRegistry()
    lag = ConsumerLag(
        settings.kafka,
        [Subscription(f"{topics_created}{GROUP}", (topic,))],
        LagMetrics(registry),
        get_logger("test"),
        interval_s=1,
        client_id="lag-test",
    )
    try:
        assert await lag.poll()
        labels = {"group": f"{topics_created}{GROUP}", "topic": topic}
        assert _value(registry, "agentstream_topic_end_offset", topic=topic, partition="0") == 10
        assert _value(registry, "agentstream_consumer_committed_offset", **labels, partition="0") == 3
        assert _value(registry, "agentstream_consumer_lag", **labels, partition="0") == 7
        # Partition 1 holds nothing and was never committed: no lag, still exported.
        assert _value(registry, "agentstream_consumer_lag", **labels, partition="1") == 0

        await _produce_one_batch(bootstrap, topic, 5)
        await _commit(bootstrap, f"{topics_created}{GROUP}", tp, 15)
        assert await lag.poll()
        assert _value(registry, "agentstream_topic_end_offset", topic=topic, partition="0") == 15
        assert _value(registry, "agentstream_consumer_lag", **labels, partition="0") == 0
        assert _value(registry, "agentstream_consumer_lag_polls_total", outcome="ok") == 2
    finally:
        await lag.close()


def test_a_partition_never_committed_counts_from_its_first_offset() -> None:
    assert lag_of(end=10, committed=None, start=4) == 6
    assert lag_of(end=10, committed=-1, start=0) == 10
    assert lag_of(end=10, committed=12, start=0) == 0  # never negative


async def test_committed_offset_age_is_how_old_the_oldest_uncommitted_record_is(settings_factory, topics_created):
    settings = settings_factory()
    bootstrap, group = settings.kafka.bootstrap_servers, f"{topics_created}{GROUP}-age"
    topic = f"{topics_created}inbound"
    now_ms = int(time.time() * 1000)
    # Two records written ten minutes ago, then two written now.
    await _produce_one_batch(bootstrap, topic, 4, [now_ms - 600_000, now_ms - 599_000, now_ms, now_ms])
    tp = TopicPartition(topic, 0)
    registry = CollectorRegistry()
    lag = ConsumerLag(
        settings.kafka, [Subscription(group, (topic,))], LagMetrics(registry), get_logger("test"),
        interval_s=1, client_id="lag-age-test",
    )  # fmt: skip
    labels = {"group": group, "topic": topic, "partition": "0"}
    age = "agentstream_consumer_committed_offset_age_seconds"
    try:
        await _commit(bootstrap, group, tp, 1)  # the oldest uncommitted record: offset 1, 599 s old
        assert await lag.poll()
        held = _value(registry, age, **labels)
        assert held is not None and 599 <= held < 660
        assert await lag.poll()  # the same committed offset: the same record, a little older
        again = _value(registry, age, **labels)
        assert again is not None and held <= again < 660
        await _commit(bootstrap, group, tp, 2)  # the old ones committed: the oldest left was written now
        assert await lag.poll()
        fresh = _value(registry, age, **labels)
        assert fresh is not None and 0 <= fresh < 60
        await _commit(bootstrap, group, tp, 4)  # everything committed
        assert await lag.poll()
        assert _value(registry, age, **labels) == 0
        # A partition with nothing in it is exported at 0 too.
        assert _value(registry, age, **{**labels, "partition": "1"}) == 0
    finally:
        await lag.close()


def test_committed_age_is_zero_without_a_record_and_never_negative() -> None:
    assert committed_age_s(None, now_ms=5_000) == 0
    assert committed_age_s(-1, now_ms=5_000) == 0
    assert committed_age_s(2_000, now_ms=5_000) == 3.0
    assert committed_age_s(6_000, now_ms=5_000) == 0  # a producer clock ahead of ours
