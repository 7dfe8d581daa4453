"""One batch's output, handed to the producer as record batches, one per topic-partition.

FastStream's publish path (publish command, middlewares, header rendering) cost more per
record than the rest of ingress together, so ingress writes to the broker's aiokafka
producer directly: each record goes to the partition a keyed `send` would pick
(aiokafka's `DefaultPartitioner`: murmur2 of the key, modulo the partition count), and
the records of one topic-partition go out in the order they were added, in as few
record batches as fit.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import murmur2
from aiokafka.producer.message_accumulator import BatchBuilder
from pydantic import BaseModel

from agentstream.kafka.producer import Headers, encode_record

# Up to this many bytes per record batch (the producer's `max_batch_size` is 16 KiB). The
# producer keeps one request in flight per broker, so a batch's output in 16 KiB pieces
# waited for one broker round trip per piece. Half of Kafka's default `message.max.bytes`.
BATCH_BYTES = 512 * 1024


def new_batch(producer: AIOKafkaProducer) -> BatchBuilder:
    """What `producer.create_batch()` makes, with room for BATCH_BYTES instead of the
    producer's `max_batch_size` (aiokafka has no public knob for one batch's size)."""
    accumulator = producer._message_accumulator
    if producer._txn_manager is not None or producer._key_serializer or producer._value_serializer:
        return producer.create_batch()  # not how our brokers are built: keep aiokafka's own
    return BatchBuilder(
        max(accumulator._batch_size, BATCH_BYTES), accumulator._compression_type, is_transactional=False
    )


class Output:
    """Records for several topics; `send` hands them over and returns the acks to await."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bytes, Headers]] = []

    def add(self, topic: str, record: BaseModel, key: str) -> None:
        self.records.append((topic, *encode_record(record, key)))

    async def send(self, producer: AIOKafkaProducer) -> list[asyncio.Future[Any]]:
        partitions: dict[str, list[int]] = {}
        hashes: dict[bytes, int] = {}  # a run's records share their key: hash it once
        builders: dict[tuple[str, int], Any] = {}  # aiokafka BatchBuilder per topic-partition
        acks: list[asyncio.Future[Any]] = []
        for topic, key, value, headers in self.records:
            if topic not in partitions:  # once per topic and batch (no wait once the metadata is known)
                partitions[topic] = sorted(await producer.partitions_for(topic))
            if key not in hashes:
                hashes[key] = murmur2(key) & 0x7FFFFFFF
            partition = partitions[topic][hashes[key] % len(partitions[topic])]  # as DefaultPartitioner
            tp = (topic, partition)
            builder = builders.get(tp)
            if builder is None:
                builder = builders[tp] = new_batch(producer)
            if builder.append(key=key, value=value, timestamp=None, headers=headers) is None:  # full
                acks.append(await producer.send_batch(builder, topic, partition=partition))
                builder = builders[tp] = new_batch(producer)
                builder.append(key=key, value=value, timestamp=None, headers=headers)  # a first record always fits
        for (topic, partition), builder in builders.items():
            acks.append(await producer.send_batch(builder, topic, partition=partition))
        self.records = []
        return acks
