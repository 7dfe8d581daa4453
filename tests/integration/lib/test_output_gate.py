"""The producer's output held while the embedded broker is lost: a record pending when it died
fails (never a false ack from the restarted broker), new records are refused until the topics
are back, and only records sent after that land in the recreated topic."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from agentstream.config import load_settings
from agentstream.kafka import EmbeddedBroker, Topics, free_port, make_broker
from agentstream.kafka.health import BrokerHealth
from agentstream.kafka.producer import OutputGate, OutputHeld, producer_of
from agentstream.observability import get_logger
from agentstream_testing.kafka import SEEK_TO_BEGINNING


def kafka_settings(bootstrap: str, prefix: str, embedded: bool = True):
    return load_settings(
        kafka={"bootstrap_servers": bootstrap, "topic_prefix": prefix, "in_memory": embedded, "partitions": 2}
    ).kafka


async def records_in(bootstrap: str, topic: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50, auto_offset_reset=SEEK_TO_BEGINNING
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(2)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        values: list[bytes] = []
        async with asyncio.timeout(10):
            while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    values += [r.value for r in batch if r.value is not None]
        return values
    finally:
        await consumer.stop()


async def test_pending_record_fails_and_new_ones_wait_for_the_topics() -> None:
    port = free_port()
    embedded = EmbeddedBroker(port=port)
    await asyncio.to_thread(embedded.start)
    prefix = f"g{uuid.uuid4().hex[:8]}."
    kafka = kafka_settings(embedded.bootstrap_servers, prefix)
    topic = Topics(prefix).inbound
    log = get_logger("test.output")
    broker = make_broker(kafka)
    await broker.connect()
    gate = OutputGate(broker, log)
    health = BrokerHealth(kafka, Topics(prefix).all(), log, client_id="test-output", output=gate)
    try:
        await health.check()  # creates the topics
        assert health.ok, health.reason
        producer = producer_of(broker)
        await (await producer.send(topic, b"before", key=b"k"))

        embedded.stop()
        pending = await producer.send(topic, b"pending since the loss", key=b"k")
        await health.check()
        assert gate.held and not health.ok
        with pytest.raises(OutputHeld):
            async with asyncio.timeout(10):
                await pending
        with pytest.raises(OutputHeld):
            await producer.send(topic, b"refused while lost", key=b"k")

        embedded = EmbeddedBroker(port=port)  # memory storage: a new cluster, no topics
        await asyncio.to_thread(embedded.start)
        async with asyncio.timeout(30):
            while not health.ok:
                await health.check()
                await asyncio.sleep(0.2)
        assert not gate.held
        await (await producer.send(topic, b"after", key=b"k"))
        assert await records_in(embedded.bootstrap_servers, topic) == [b"after"]
    finally:
        await health.close()
        await broker.stop()
        embedded.stop()


def test_apache_kafka_keeps_the_producer_retrying() -> None:
    """A broker that keeps its topics across a restart gets no gate: aiokafka's retries stay."""
    kafka = kafka_settings("127.0.0.1:9", "p.", embedded=False)
    gate = OutputGate(make_broker(kafka), get_logger("test.output"))
    health = BrokerHealth(kafka, Topics("p.").all(), get_logger("test.output"), client_id="t", output=gate)
    assert health.output is None
