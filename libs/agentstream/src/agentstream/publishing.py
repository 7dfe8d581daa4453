"""The publisher part: a typed record to its topic, through the broker's own producer.

`publish(topic, record)` takes a registry topic (`agentstream.kafka.topics`), so a record sent
to a topic that does not carry it is a type error (tests/typing/topic_publish.py); the key is
the topic's key of the record unless the caller gives one. Written with the broker's aiokafka
producer directly (FastStream's publish path costs ~3x its `send`, see kafka/producer.py).
Every record is counted in `agentstream_records_published_total{service,topic}`.

Built once per service (`Infra.build`) and handed to whatever publishes: the service's
handlers, the runner's run ports, the executor's tool catalog.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from faststream.kafka import KafkaBroker
from prometheus_client import CollectorRegistry

from agentstream.kafka.internals import producer_of
from agentstream.kafka.producer import encode_record
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

    def _published(self, topic: str) -> Any:
        child = self._by_topic.get(topic)
        if child is None:
            child = self._by_topic[topic] = self._counter.labels(self._service, topic)
        return child
