"""The topic registry: every topic once, as a typed `Topic[R]` value, and topic creation.

A `Topic[R]` names the records it carries (`R`, a record class or a union of them), how a
record's key is made, and its broker settings. It is the single source of `topics create`, the
Strimzi KafkaTopic resources (`agentstream.deploy`), the AsyncAPI document
(`agentstream.asyncapi`) and the topic table of docs/topics.md (a test compares them), and
`Service.publish(topic, record)` takes it, so mypy refuses a record sent to the wrong topic.

Every run-scoped topic has the same partition count so that one conversation's
commands, tool results and events are co-partitioned (same key → same partition
number → same runner). `tool-catalog` is not run-scoped: one partition, compacted.
A topic's full name carries the configured prefix: `Topics(kafka.topic_prefix).name(topic)`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from pydantic import BaseModel

from agentstream.config import KafkaSettings
from agentstream.contracts import (
    DeadLetter,
    DeliveryReceipt,
    InboundMessage,
    RunCommand,
    RunEvent,
    ToolCallRequest,
    ToolCallResult,
    ToolCatalogEntry,
    WebFrame,
)
from agentstream.kafka.security import client_security

# Invariant on purpose: `publish(topic: Topic[R], record: R)` must bind R to the topic's own
# record type; a covariant R would let mypy widen it to a common base and accept any record.
R = TypeVar("R", bound=BaseModel)

# How long a deleted-by-time topic keeps records. Explicit so `topics create` and the Strimzi
# KafkaTopic resources agree whatever the cluster's default.
DAY_MS = 24 * 3600 * 1000
DEFAULT_RETENTION_MS = 7 * DAY_MS
CONVERSATION_KEY = "conversation key"


class _Conversational(Protocol):
    @property
    def conversation_key(self) -> str: ...


def by_conversation(record: _Conversational) -> str:
    """The key of every run-scoped record: its conversation key (docs/topics.md § Keys)."""
    return record.conversation_key


@dataclass(frozen=True, eq=False)
class Topic(Generic[R]):
    """One topic: its short name (without the prefix), the records it carries and how they are keyed.

    `record` is the annotation the AsyncAPI schema is read from: the class, or the discriminated
    union, that `R` names for mypy. `partitions` None: `kafka.partitions` (every run-scoped topic,
    so they stay co-partitioned). A compacted topic keeps the latest record per key and no
    retention by time.
    """

    name: str
    record: Any
    key: Callable[[R], str]
    key_doc: str  # the key, in words, for the docs and the AsyncAPI description
    summary: str
    producers: tuple[str, ...]
    consumers: tuple[str, ...]
    partitions: int | None = None
    compacted: bool = False
    retention_ms: int = DEFAULT_RETENTION_MS

    def key_of(self, record: R) -> str:
        return self.key(record)

    def partition_count(self, kafka: KafkaSettings) -> int:
        return self.partitions if self.partitions is not None else kafka.partitions

    def config(self, min_insync_replicas: int | None = None) -> dict[str, str]:
        """The broker settings: compaction, or retention by time; and how many replicas must hold
        a record before an `acks=all` write of it succeeds, when set (else the broker's default,
        1: a write then survives no broker loss; docs/deploy.md)."""
        config = {"cleanup.policy": "compact"} if self.compacted else {"retention.ms": str(self.retention_ms)}
        if min_insync_replicas is not None:
            config["min.insync.replicas"] = str(min_insync_replicas)
        return config

    def description(self) -> str:
        """What the AsyncAPI document says about this topic."""
        return (
            f"{self.summary} Key: {self.key_doc}. "
            f"Produced by: {', '.join(self.producers)}. Consumed by: {', '.join(self.consumers)}."
        )


INBOUND: Topic[InboundMessage] = Topic(
    "inbound",
    InboundMessage,
    by_conversation,
    CONVERSATION_KEY,
    "Messages from users on any platform: the public input contract.",
    producers=("users", "webhooks", "ingress HTTP", "delivery (relay forwards)"),
    consumers=("ingress",),
)
RUNS: Topic[RunCommand] = Topic(
    "runs",
    RunCommand,
    by_conversation,
    CONVERSATION_KEY,
    "Commands for the agent-runner: start, interrupt, resume, reset, answer an approval.",
    producers=("ingress", "persistence (auto-resume)"),
    consumers=("agent-runner",),
)
TOOL_CALLS: Topic[ToolCallRequest] = Topic(
    "tool-calls",
    ToolCallRequest,
    by_conversation,
    CONVERSATION_KEY,
    "One record per tool call attempt; idempotency key `run_id:call_id`.",
    producers=("agent-runner",),
    consumers=("tool-executor",),
)
TOOL_RESULTS: Topic[ToolCallResult] = Topic(
    "tool-results",
    ToolCallResult,
    by_conversation,
    CONVERSATION_KEY,
    "The outcome of each tool call, co-partitioned with `runs`.",
    producers=("tool-executor",),
    consumers=("agent-runner",),
)
# Not run-scoped: the latest state per tool, read whole by every runner (docs/topics.md).
TOOL_CATALOG: Topic[ToolCatalogEntry] = Topic(
    "tool-catalog",
    ToolCatalogEntry,
    lambda entry: entry.tool,
    "tool name",
    "Compacted: which tools each executor serves now, republished every `heartbeat_s`.",
    producers=("tool-executor",),
    consumers=("agent-runner (read whole, no group)",),
    partitions=1,
    compacted=True,
)
EVENTS: Topic[RunEvent] = Topic(
    "events",
    RunEvent,
    by_conversation,
    CONVERSATION_KEY,
    "Everything that happens in a run; `seq` strictly increases per root run.",
    producers=("ingress", "agent-runner", "tool-executor", "persistence", "`agentstream replay`"),
    consumers=("delivery", "persistence"),
)
DELIVERIES: Topic[DeliveryReceipt] = Topic(
    "deliveries",
    DeliveryReceipt,
    by_conversation,
    CONVERSATION_KEY,
    "Delivery ledger transitions and platform message ids.",
    producers=("delivery",),
    consumers=("operators", "hooks"),
)
# Read live (a page's history comes from persistence): a day is plenty.
WEB_FRAMES: Topic[WebFrame] = Topic(
    "web-frames",
    WebFrame,
    lambda frame: frame.chat_id,
    "web chat id",
    "What the web chat page shows; every delivery replica reads all of it (no consumer group).",
    producers=("delivery (web adapter)",),
    consumers=("delivery (every replica, read whole, no group)",),
    retention_ms=DAY_MS,
)
# A week outlasts any outage a consumer recovers from; dead letters wait a month for a person.
DLQ: Topic[DeadLetter] = Topic(
    "dlq",
    DeadLetter,
    lambda letter: letter.key or "",
    "the original record's key",
    "Records no service could use, with the reason.",
    producers=("every service",),
    consumers=("operators",),
    retention_ms=30 * DAY_MS,
)

# Every topic, in the order the docs and the AsyncAPI document list them.
TOPICS: tuple[Topic[Any], ...] = (
    INBOUND,
    RUNS,
    TOOL_CALLS,
    TOOL_RESULTS,
    TOOL_CATALOG,
    EVENTS,
    DELIVERIES,
    WEB_FRAMES,
    DLQ,
)
TOPIC_NAMES = tuple(topic.name for topic in TOPICS)
_BY_NAME: dict[str, Topic[Any]] = {topic.name: topic for topic in TOPICS}


@dataclass(frozen=True, slots=True)
class Addressed:
    """A record and the topic it goes to, for code that collects records of several topics before
    handing them over. Made by `addressed`, which checks the pair's types."""

    topic: Topic[Any]
    record: BaseModel


def addressed(topic: Topic[R], record: R) -> Addressed:
    """`record` for `topic`: like `Service.publish`, mypy refuses a record of another topic."""
    return Addressed(topic, record)


def topic_named(short: str) -> Topic[Any]:
    """The registry's topic of that short name (a name from a config file or the command line)."""
    try:
        return _BY_NAME[short]
    except KeyError:
        raise KeyError(f"unknown topic {short!r}; known: {', '.join(TOPIC_NAMES)}") from None


def consumer_group(kafka: KafkaSettings, service: str) -> str:
    """The consumer group of a service's main subscription (what lag is measured against)."""
    return f"{kafka.topic_prefix}{service}"


class _TopicProperty:
    """A read-only `Topics` attribute: the full name of one topic under that registry's prefix."""

    def __init__(self, topic: Topic[Any]) -> None:
        self.topic = topic

    def __get__(self, topics: Topics, owner: type[Topics] | None = None) -> str:
        return topics.name(self.topic)


@dataclass(frozen=True)
class Topics:
    """Full topic names for one prefix (`kafka.topic_prefix`): what a subscriber or a reader names."""

    prefix: str

    inbound = _TopicProperty(INBOUND)
    runs = _TopicProperty(RUNS)
    tool_calls = _TopicProperty(TOOL_CALLS)
    tool_results = _TopicProperty(TOOL_RESULTS)
    tool_catalog = _TopicProperty(TOOL_CATALOG)
    events = _TopicProperty(EVENTS)
    deliveries = _TopicProperty(DELIVERIES)
    web_frames = _TopicProperty(WEB_FRAMES)
    dlq = _TopicProperty(DLQ)

    def name(self, topic: Topic[Any] | str) -> str:
        """The full name of a registry topic, or of a short name (refused unless it is one)."""
        short = topic.name if isinstance(topic, Topic) else topic_named(topic).name
        return self.prefix + short

    def all(self) -> list[str]:
        return [self.name(t) for t in TOPICS]


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
                topics.name(topic),
                num_partitions=topic.partition_count(kafka),
                replication_factor=kafka.replication_factor,
                topic_configs=topic.config(kafka.min_insync_replicas),
            )
            for topic in TOPICS
            if topics.name(topic) not in existing
        ]
        if wanted:
            with contextlib.suppress(TopicAlreadyExistsError):  # another service created them concurrently
                await admin.create_topics(wanted)
        return [t.name for t in wanted]
    finally:
        await admin.close()
