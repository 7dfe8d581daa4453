"""The publisher part: a typed record to its topic, through the broker's own producer.

`publish(topic, record)` takes a registry topic (`agentstream.kafka.topics`), so a record sent
to a topic that does not carry it is a type error (tests/typing/topic_publish.py); the key is
the topic's key of the record unless the caller gives one. Written with the broker's aiokafka
producer directly (FastStream's publish path costs ~3x its `send`, see kafka/producer.py).
Every record is counted in `agentstream_records_published_total{service,topic}`.

`publish_batched` hands a record over without a `send` of its own: the records handed over in
one turn of the event loop (a wave of tool results whose tasks woke together) leave as one record
batch per topic-partition (`send_batch`), to the partition a keyed `send` would pick. aiokafka's
per-record `send` was the largest single CPU cost of a tool call (bench/README.md, Tool round trip).

Built once per service (`Infra.build`) and handed to whatever publishes: the service's
handlers, the runner's run ports, the executor's tool catalog.
"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple, cast

from faststream.kafka import KafkaBroker
from prometheus_client import CollectorRegistry

from agentstream.kafka.internals import producer_of, record_batch
from agentstream.kafka.producer import Headers, KeyPartitioner, encode_record
from agentstream.kafka.topics import R, Topic, Topics
from agentstream.observability import records_published


class Publisher:
    """Typed records to the topics of one service's broker (started: its producer exists)."""

    def __init__(self, broker: KafkaBroker, topics: Topics, registry: CollectorRegistry, service: str) -> None:
        self._broker = broker
        self._topics = topics
        self._service = service
        self._counter = records_published(registry)
        self._by_topic: dict[str, Any] = {}  # full topic name → its counter child, looked up once
        self._partitioner = KeyPartitioner()
        self._queued: list[_Queued] = []  # handed to `publish_batched`, not yet to the producer
        self._sending: asyncio.Task[None] | None = None  # the one task handing them over, in order

    async def publish(self, topic: Topic[R], record: R, key: str | None = None) -> None:
        """Publish and wait until the broker has stored the record."""
        ack = await self.publish_nowait(topic, record, key)
        await ack

    async def publish_nowait(self, topic: Topic[R], record: R, key: str | None = None) -> asyncio.Future[Any]:
        """Hand the record to the producer and return the future of its ack.

        Records handed over in order reach a partition in that order (the producer has one
        request in flight per partition), so a caller can stream records without a round trip
        each and await the futures where it needs them stored.
        """
        name = self._topics.name(topic)
        raw_key, value, headers = encode_record(record, topic.key_of(record) if key is None else key)
        ack = await producer_of(self._broker).send(name, value, key=raw_key, headers=headers)
        self._published(name).inc()
        return cast("asyncio.Future[Any]", ack)

    def publish_batched(self, topic: Topic[R], record: R, key: str | None = None) -> asyncio.Future[None]:
        """Queue the record; the future of its ack (or of the failure of its batch).

        Encoded now (it carries the caller's trace context); handed to the producer by a task that
        first runs once every task woken in this turn of the loop has queued its record, so those
        records share one record batch per topic-partition. Records queued in order reach a
        partition in that order. Awaiting the future and being cancelled leaves the batch alone."""
        name = self._topics.name(topic)
        raw_key, value, headers = encode_record(record, topic.key_of(record) if key is None else key)
        acked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued.append(_Queued(name, raw_key, value, headers, acked))
        if self._sending is None:
            self._sending = asyncio.create_task(self._send_queued(), name="publish-batched")
        return acked

    async def _send_queued(self) -> None:
        try:
            while self._queued:
                queued, self._queued = self._queued, []
                try:
                    await self._send_batches(queued)
                except Exception as err:  # refused (the output gate), no metadata, stopped: each sender sees it
                    for item in queued:
                        if not item.acked.done():
                            item.acked.set_exception(err)
        finally:
            self._sending = None

    async def _send_batches(self, queued: list[_Queued]) -> None:
        producer = producer_of(self._broker)
        partitions: dict[str, list[int]] = {}
        batches: dict[tuple[str, int], tuple[Any, list[asyncio.Future[None]]]] = {}
        for item in queued:
            all_partitions = partitions.get(item.topic)
            if all_partitions is None:  # once per topic and wave (no wait once the metadata is known)
                all_partitions = partitions[item.topic] = sorted(await producer.partitions_for(item.topic))
            tp = (item.topic, self._partitioner(item.key, all_partitions, all_partitions))
            batch = batches.get(tp)
            if batch is None:
                batch = batches[tp] = (record_batch(producer, 0), [])
            if batch[0].append(key=item.key, value=item.value, timestamp=None, headers=item.headers) is None:
                await self._send_batch(producer, tp, *batch)  # full: this one goes, a new one for the rest
                batch = batches[tp] = (record_batch(producer, 0), [])
                batch[0].append(key=item.key, value=item.value, timestamp=None, headers=item.headers)
            batch[1].append(item.acked)
        for tp, (builder, acked) in batches.items():
            await self._send_batch(producer, tp, builder, acked)

    async def _send_batch(
        self, producer: Any, tp: tuple[str, int], builder: Any, acked: list[asyncio.Future[None]]
    ) -> None:
        topic, partition = tp
        try:
            ack = await producer.send_batch(builder, topic, partition=partition)
        except Exception as err:
            for future in acked:
                if not future.done():
                    future.set_exception(err)
            return
        self._published(topic).inc(len(acked))
        ack.add_done_callback(lambda done: _settle(done, acked))

    def _published(self, topic: str) -> Any:
        child = self._by_topic.get(topic)
        if child is None:
            child = self._by_topic[topic] = self._counter.labels(self._service, topic)
        return child


class _Queued(NamedTuple):
    topic: str  # its full name
    key: bytes
    value: bytes
    headers: Headers
    acked: asyncio.Future[None]


def _settle(batch: asyncio.Future[Any], acked: list[asyncio.Future[None]]) -> None:
    """Each record's future as its batch's: acked, or failed with the batch's error."""
    error = None if batch.cancelled() else batch.exception()
    for future in acked:
        if future.done():  # its sender was cancelled while waiting
            continue
        if batch.cancelled():
            future.cancel()
        elif error is not None:
            future.set_exception(error)
        else:
            future.set_result(None)
