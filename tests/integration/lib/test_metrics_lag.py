"""Consumer lag read from the real broker: committed offsets against end offsets, batched
records counted whole (Tansu lists a partition's end as its last batch's base + 1)."""

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from prometheus_client import CollectorRegistry

from agentstream.metrics.lag import ConsumerLag, LagMetrics, Subscription, lag_of
from agentstream.observability import get_logger

GROUP = "lag-test-group"


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def _produce_one_batch(bootstrap: str, topic: str, count: int) -> None:
    """`count` records to partition 0, sent together so the producer writes them as one batch."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    await producer.start()
    try:
        acks = [await producer.send(topic, f"r{i}".encode(), partition=0) for i in range(count)]
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
