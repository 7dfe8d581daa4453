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

TOPIC_NAMES = (
    "inbound",
    "runs",
    "tool-calls",
    "tool-results",
    "tool-catalog",
    "events",
    "deliveries",
    "web-frames",
    "dlq",
)
# Topics that are not run-scoped: their own partition count and settings. `tool-catalog` holds
# the latest state per tool (compacted) and is read whole by every runner (docs/topics.md).
TOPIC_PARTITIONS = {"tool-catalog": 1}
TOPIC_CONFIGS = {"tool-catalog": {"cleanup.policy": "compact"}}
# How long a deleted-by-time topic keeps records. Explicit so `topics create` and the Strimzi
# KafkaTopic resources (generated from this registry) agree whatever the cluster's default.
# A week outlasts any outage a consumer recovers from; dead letters wait a month for a person;
# web frames are read live (a page's history comes from persistence), a day is plenty.
DAY_MS = 24 * 3600 * 1000
TOPIC_RETENTION_MS = {"dlq": 30 * DAY_MS, "web-frames": DAY_MS}
DEFAULT_RETENTION_MS = 7 * DAY_MS


def topic_config(short: str, min_insync_replicas: int | None = None) -> dict[str, str]:
    """The broker settings of one topic: compaction, or retention by time; and how many replicas
    must hold a record before an `acks=all` write of it succeeds, when set (else the broker's
    default, 1: a write then survives no broker loss; docs/deploy.md)."""
    config = dict(TOPIC_CONFIGS.get(short, {}))
    if config.get("cleanup.policy") != "compact":
        config["retention.ms"] = str(TOPIC_RETENTION_MS.get(short, DEFAULT_RETENTION_MS))
    if min_insync_replicas is not None:
        config["min.insync.replicas"] = str(min_insync_replicas)
    return config


def consumer_group(kafka: KafkaSettings, service: str) -> str:
    """The consumer group of a service's main subscription (what lag is measured against)."""
    return f"{kafka.topic_prefix}{service}"


def topic_partitions(short: str, kafka: KafkaSettings) -> int:
    return TOPIC_PARTITIONS.get(short, kafka.partitions)


class _TopicProperty:
    """A read-only `Topics` attribute: the full name of one topic under that registry's prefix."""

    def __init__(self, short: str) -> None:
        self.short = short

    def __get__(self, topics: Topics, owner: type[Topics] | None = None) -> str:
        return topics.name(self.short)


@dataclass(frozen=True)
class Topics:
    """Full topic names for one prefix."""

    prefix: str

    inbound = _TopicProperty("inbound")
    runs = _TopicProperty("runs")
    tool_calls = _TopicProperty("tool-calls")
    tool_results = _TopicProperty("tool-results")
    tool_catalog = _TopicProperty("tool-catalog")
    events = _TopicProperty("events")
    deliveries = _TopicProperty("deliveries")
    web_frames = _TopicProperty("web-frames")
    dlq = _TopicProperty("dlq")

    def name(self, short: str) -> str:
        if short not in TOPIC_NAMES:
            raise KeyError(f"unknown topic {short!r}; known: {', '.join(TOPIC_NAMES)}")
        return f"{self.prefix}{short}"

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
                num_partitions=topic_partitions(short, kafka),
                replication_factor=kafka.replication_factor,
                topic_configs=topic_config(short, kafka.min_insync_replicas),
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
