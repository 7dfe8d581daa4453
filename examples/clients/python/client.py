"""Produces one InboundMessage to agentstream's `inbound` topic and follows the answer on `events`
through a consumer group of its own, with confluent-kafka (librdkafka): docs/clients.md,
docs/producing.md. Nothing of agentstream is imported.

Settings come from the environment: BOOTSTRAP_SERVERS (default localhost:9092), TOPIC_PREFIX
(agentstream.), GROUP_ID (agentstream-example-python), PLATFORM (console), CHAT_ID (local),
USER_ID (alice), TEXT (calculate 6*7), TIMEOUT_S (120).
stdout: the final answer. stderr: each followed event. Exit 0 when the run completed, 1 when it
ended otherwise, 2 on timeout or a Kafka error.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer


def env(name: str, fallback: str) -> str:
    return os.environ.get(name) or fallback


def produce(producer: Producer, topic: str, key: str, message: dict[str, Any]) -> Message:
    delivered: list[tuple[KafkaError | None, Message]] = []
    producer.produce(
        topic, json.dumps(message).encode(), key=key.encode(), on_delivery=lambda e, m: delivered.append((e, m))
    )
    if producer.flush(30) or not delivered:
        raise RuntimeError(f"the InboundMessage was not delivered to {topic} in 30 s")
    error, record = delivered[0]
    if error is not None:
        raise RuntimeError(f"producing to {topic}: {error}")
    return record


def main() -> int:
    bootstrap = env("BOOTSTRAP_SERVERS", "localhost:9092")
    prefix = env("TOPIC_PREFIX", "agentstream.")
    timeout_s = float(env("TIMEOUT_S", "120"))
    # The fields docs/producing.md requires; `type` is optional and says what the record is.
    message = {
        "type": "inbound.message",
        "id": str(uuid.uuid4()),
        "platform": env("PLATFORM", "console"),
        "chat_id": env("CHAT_ID", "local"),
        "user": {"id": env("USER_ID", "alice")},
        "text": env("TEXT", "calculate 6*7"),
    }
    key = f"{message['platform']}:{message['chat_id']}"  # the conversation key (docs/producing.md § The key)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # A group of its own; a new group starts at the beginning, so nothing of the answer is
            # missed however long the join takes; an existing group resumes where it committed.
            "group.id": env("GROUP_ID", "agentstream-example-python"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # The embedded broker answers a fetch only when its wait expires (docs/clients.md).
            "fetch.wait.max.ms": 10,
        }
    )
    # librdkafka's default partitioner is CRC32-based; agentstream's topics are partitioned by
    # murmur2 of the key, as Kafka's Java client does (docs/producing.md § The key).
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    deadline = time.monotonic() + timeout_s
    root: str | None = None
    try:
        consumer.subscribe([f"{prefix}events"])
        produced = produce(producer, f"{prefix}inbound", key, message)
        print(
            f"produced {produced.topic()} partition={produced.partition()} offset={produced.offset()} "
            f"key={key} id={message['id']}",
            file=sys.stderr,
        )
        while time.monotonic() < deadline:
            record = consumer.poll(0.2)
            if record is None:
                continue
            if (error := record.error()) is not None:
                if error.retriable():
                    continue
                raise RuntimeError(f"consuming {prefix}events: {error}")
            try:
                event = json.loads(record.value() or b"")
            except ValueError:
                continue  # not ours to judge: agentstream's own consumers send bad records to dlq
            if root is None and event.get("type") == "run.queued" and event.get("inbound_id") == message["id"]:
                root = event["root_run_id"]
            if root is None or event.get("root_run_id") != root:
                continue
            print(f"event seq={event['seq']} type={event['type']}", file=sys.stderr)
            if event["type"] == "run.finished" and event["run_id"] == root:
                consumer.commit(asynchronous=False)
                if event["status"] != "completed":
                    print(f"python client: the run ended {event['status']}: {event.get('error')}", file=sys.stderr)
                    return 1
                print(event["text"])
                return 0
        print(
            f"python client: timed out after {timeout_s}s waiting for the answer to {message['id']} (root run {root})",
            file=sys.stderr,
        )
        return 2
    finally:
        consumer.close()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as err:
        print(f"python client: {err}", file=sys.stderr)
        sys.exit(2)
