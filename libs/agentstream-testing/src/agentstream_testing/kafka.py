"""Plain-aiokafka helpers for tests: produce raw bytes, read a topic from the start.

No consumer groups (manual assignment), so nothing waits for a group join.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import RecordMetadata

from agentstream.kafka.flavor import FLAVORS
from agentstream.kafka.internals import refresh_metadata
from agentstream_testing.brokers import flavor_under_test

# Every consumer here that seeks to the beginning resets to the earliest offset on its own too:
# aiokafka's first reset after `assign` (to `latest` by default) may answer after a
# `seek_to_beginning` and put the position at the end (the fetcher applies a reset's answer to any
# partition still awaiting a reset, whatever strategy it awaits). On Apache Kafka in CI
# `read_to_end` so returned a partition's records as none.
SEEK_TO_BEGINNING = "earliest"


@dataclass(frozen=True)
class RawRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


async def produce_raw(bootstrap: str, topic: str, value: bytes, key: bytes | None = None) -> RecordMetadata:
    """One record, acknowledged; where it landed (topic, partition, offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        return await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


async def read_until(
    bootstrap: str,
    topic: str,
    done: Callable[[list[RawRecord]], bool],
    timeout: float = 30.0,
) -> list[RawRecord]:
    """Read `topic` from the beginning until `done(records)` is true; TimeoutError otherwise."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=10,
        auto_offset_reset=SEEK_TO_BEGINNING,
    )
    await consumer.start()
    records: list[RawRecord] = []
    try:
        parts = consumer.partitions_for_topic(topic)
        if not parts:
            await refresh_metadata(consumer)
            parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        async with asyncio.timeout(timeout):
            while not done(records):
                batch = await consumer.getmany(timeout_ms=100)
                for tp_records in batch.values():
                    records.extend(
                        RawRecord(r.topic, r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in tp_records
                    )
        return records
    finally:
        await consumer.stop()


async def read_to_end(bootstrap: str, topic: str, timeout: float = 30.0) -> list[RawRecord]:
    """Everything on `topic` when called: from the beginning to each partition's end offset.

    To show that something was *not* produced: whatever was acked before the call is in the result.
    The end is read the way the test broker answers it (`BrokerTuning.within_end`)."""
    broker = FLAVORS[flavor_under_test()]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=10,
        auto_offset_reset=SEEK_TO_BEGINNING,
    )
    await consumer.start()
    records: list[RawRecord] = []
    try:
        await refresh_metadata(consumer)
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or set())]
        if not tps:
            raise LookupError(f"topic {topic!r} does not exist")
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        async with asyncio.timeout(timeout):
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                batch = await consumer.getmany(timeout_ms=100)
                for tp_records in batch.values():
                    records.extend(
                        RawRecord(r.topic, r.partition, r.offset, r.key, r.value, tuple(r.headers))
                        for r in tp_records
                        if broker.within_end(r.offset, ends[TopicPartition(r.topic, r.partition)])
                    )
        return records
    finally:
        await consumer.stop()
