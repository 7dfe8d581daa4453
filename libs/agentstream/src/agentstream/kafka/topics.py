"""Topic registry and creation.

Every run-scoped topic has the same partition count so that one conversation's
commands, tool results and events are co-partitioned (same key → same partition
number → same runner). `tool-catalog` is not run-scoped: one partition, compacted.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from agentstream.config import KafkaSettings
from agentstream.kafka.security import client_security

TOPIC_NAMES = ("inbound", "runs", "tool-calls", "tool-results", "tool-catalog", "events", "deliveries", "dlq")
# Topics that are not run-scoped: their own partition count and settings. `tool-catalog` holds
# the latest state per tool (compacted) and is read whole by every runner (docs/topics.md).
TOPIC_PARTITIONS = {"tool-catalog": 1}
TOPIC_CONFIGS = {"tool-catalog": {"cleanup.policy": "compact"}}


@dataclass(frozen=True)
class Topics:
    """Full topic names for one prefix."""

    prefix: str

    def name(self, short: str) -> str:
        if short not in TOPIC_NAMES:
            raise KeyError(f"unknown topic {short!r}; known: {', '.join(TOPIC_NAMES)}")
        return f"{self.prefix}{short}"

    @property
    def inbound(self) -> str:
        return self.name("inbound")

    @property
    def runs(self) -> str:
        return self.name("runs")

    @property
    def tool_calls(self) -> str:
        return self.name("tool-calls")

    @property
    def tool_results(self) -> str:
        return self.name("tool-results")

    @property
    def tool_catalog(self) -> str:
        return self.name("tool-catalog")

    @property
    def events(self) -> str:
        return self.name("events")

    @property
    def deliveries(self) -> str:
        return self.name("deliveries")

    @property
    def dlq(self) -> str:
        return self.name("dlq")

    def all(self) -> list[str]:
        return [self.name(t) for t in TOPIC_NAMES]


def admin_client(kafka: KafkaSettings) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(
        bootstrap_servers=kafka.bootstrap_servers, client_id=f"{kafka.client_id}-admin", **client_security(kafka)
    )


async def create_topics(kafka: KafkaSettings) -> list[str]:
    """Create every topic with the configured partitions; existing ones are kept.

    Returns the names that were created now.
    """
    topics = Topics(kafka.topic_prefix)
    admin = admin_client(kafka)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(
                topics.name(short),
                num_partitions=TOPIC_PARTITIONS.get(short, kafka.partitions),
                replication_factor=kafka.replication_factor,
                topic_configs=TOPIC_CONFIGS.get(short, {}),
            )
            for short in TOPIC_NAMES
            if topics.name(short) not in existing
        ]
        if wanted:
            with contextlib.suppress(TopicAlreadyExistsError):  # another service created them concurrently
                await admin.create_topics(wanted)
        return [t.name for t in wanted]
    finally:
        await admin.close()
