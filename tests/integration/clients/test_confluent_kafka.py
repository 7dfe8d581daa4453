"""A client agentstream does not ship, librdkafka's `confluent-kafka`, talks to the stack on its own:
it produces an InboundMessage as plain JSON and follows the answer on `events` through a consumer
group, against the real broker and the demo model (docs/clients.md)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from agentstream.kafka import Topics
from agentstream_stack.embedded import embedded_stack, free_ports
from tests.e2e.conftest import DEMO_ANSWER

pytestmark = pytest.mark.integration


def produce_inbound(bootstrap: str, topic: str, message: dict[str, Any]) -> None:
    # murmur2 of the key, as agentstream's own producers partition (docs/producing.md § The key).
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    delivered: list[KafkaError | None] = []
    key = f"{message['platform']}:{message['chat_id']}"  # platform:chat_id[:thread_id]
    producer.produce(
        topic, json.dumps(message).encode(), key=key.encode(), on_delivery=lambda err, _msg: delivered.append(err)
    )
    assert producer.flush(15) == 0, "the InboundMessage was not delivered in 15 s"
    assert delivered == [None], delivered


def follow_answer(consumer: Consumer, inbound_id: str, timeout: float) -> list[dict[str, Any]]:
    """The events of the run `inbound_id` caused, in order, up to its root's `run.finished`."""
    root: str | None = None
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = consumer.poll(0.5)
        if record is None:
            continue
        if record.error() is not None:
            raise RuntimeError(f"consumer error: {record.error()}")
        event = json.loads(record.value())
        if root is None and event["type"] == "run.queued" and event.get("inbound_id") == inbound_id:
            root = event["root_run_id"]
        if root is not None and event["root_run_id"] == root:
            events.append(event)
            if event["type"] == "run.finished" and event["run_id"] == root:
                return events
    raise TimeoutError(f"no run.finished for {inbound_id} in {timeout} s; saw {[e['type'] for e in events]}")


def round_trip(bootstrap: str, topics: Topics, message: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """(the answer's events, the offset the group committed on their partition)."""
    group = f"{topics.prefix}confluent-client"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topics.events])
        produce_inbound(bootstrap, topics.inbound, message)
        events = follow_answer(consumer, message["id"], timeout=90)
        committed = consumer.commit(asynchronous=False)
        assert committed is not None
        finished = next(tp for tp in committed if tp.topic == topics.events and tp.offset > 0)
        again = consumer.committed([TopicPartition(topics.events, finished.partition)], timeout=10)
        return events, again[0].offset
    finally:
        consumer.close()


async def test_confluent_kafka_sends_a_message_and_follows_the_answer_through_a_group(settings_factory) -> None:
    settings = settings_factory()
    message = {
        "id": str(uuid.uuid4()),
        "platform": "memory",
        "chat_id": f"chat-{uuid.uuid4().hex[:6]}",
        "user": {"id": "u-confluent", "name": "librdkafka"},
        "text": "calculate 6*7",
    }
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        topics = Topics(stack.settings.kafka.topic_prefix)
        events, committed = await asyncio.to_thread(round_trip, stack.settings.kafka.bootstrap_servers, topics, message)

    types = [e["type"] for e in events]
    assert types[0] == "run.queued" and types[-1] == "run.finished", types
    finished = events[-1]
    assert (finished["status"], finished["text"]) == ("completed", DEMO_ANSWER)
    assert [e["tool"] for e in events if e["type"] == "tool.call"] == ["calculator"]
    assert [e["content"] for e in events if e["type"] == "tool.result"] == ["42"]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)), seqs  # in order, none twice, through the group
    assert {e["conversation_key"] for e in events} == {f"memory:{message['chat_id']}"}
    assert committed > 0  # the group's offset is stored on the broker
