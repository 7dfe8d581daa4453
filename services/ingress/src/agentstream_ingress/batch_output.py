"""One batch's output, handed to the producer as record batches, one per topic-partition.

FastStream's publish path (publish command, middlewares, header rendering) cost more per
record than the rest of ingress together, so ingress writes to the broker's aiokafka
producer directly: each record goes to the partition a keyed `send` would pick
(`agentstream.kafka.internals.partition_of_key`), and the records of one topic-partition go out in the order they were added, in as few
record batches as fit.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

from agentstream.kafka.internals import partition_of_key, record_batch
from agentstream.kafka.producer import Headers, encode_record

# Up to this many bytes per record batch (the producer's `max_batch_size` is 16 KiB). The
# producer keeps one request in flight per broker, so a batch's output in 16 KiB pieces
# waited for one broker round trip per piece. Half of Kafka's default `message.max.bytes`.
BATCH_BYTES = 512 * 1024


class BatchOutput:
    """Records for several topics; `send` hands them over and returns the acks to await."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bytes, Headers]] = []

    def add(self, topic: str, record: BaseModel, key: str) -> None:
        self.records.append((topic, *encode_record(record, key)))

    async def send(self, producer: AIOKafkaProducer) -> list[asyncio.Future[Any]]:
        partitions: dict[str, list[int]] = {}
        chosen: dict[tuple[str, bytes], int] = {}  # a run's records share their key: hash it once
        builders: dict[tuple[str, int], Any] = {}  # aiokafka BatchBuilder per topic-partition
        acks: list[asyncio.Future[Any]] = []
        for topic, key, value, headers in self.records:
            if topic not in partitions:  # once per topic and batch (no wait once the metadata is known)
                partitions[topic] = sorted(await producer.partitions_for(topic))
            partition = chosen.get((topic, key))
            if partition is None:
                partition = chosen[topic, key] = partition_of_key(key, partitions[topic])
            tp = (topic, partition)
            builder = builders.get(tp)
            if builder is None:
                builder = builders[tp] = record_batch(producer, BATCH_BYTES)
            if builder.append(key=key, value=value, timestamp=None, headers=headers) is None:  # full
                acks.append(await producer.send_batch(builder, topic, partition=partition))
                builder = builders[tp] = record_batch(producer, BATCH_BYTES)
                builder.append(key=key, value=value, timestamp=None, headers=headers)  # a first record always fits
        for (topic, partition), builder in builders.items():
            acks.append(await producer.send_batch(builder, topic, partition=partition))
        self.records = []
        return acks
