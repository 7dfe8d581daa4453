"""agentstream.kafka.topics: the registry of typed topics, full names under one prefix, each topic's
broker settings and key, group names."""

from __future__ import annotations

import pytest

from agentstream.config import KafkaSettings
from agentstream.contracts import DeadLetter, ToolCatalogEntry, WebFrame, WebFrameOp
from agentstream.kafka.topics import (
    DAY_MS,
    DLQ,
    EVENTS,
    RUNS,
    TOOL_CATALOG,
    TOPIC_NAMES,
    TOPICS,
    WEB_FRAMES,
    Topics,
    consumer_group,
    topic_named,
)


def test_each_topic_attribute_is_its_prefixed_name() -> None:
    topics = Topics("acme.")
    named = [
        topics.inbound,
        topics.runs,
        topics.tool_calls,
        topics.tool_results,
        topics.tool_catalog,
        topics.events,
        topics.deliveries,
        topics.web_frames,
        topics.dlq,
    ]
    assert named == [f"acme.{short}" for short in TOPIC_NAMES]
    assert topics.all() == named


def test_an_unknown_topic_is_refused() -> None:
    with pytest.raises(KeyError, match="unknown topic"):
        Topics("acme.").name("nope")


def test_a_topic_value_and_its_short_name_resolve_alike() -> None:
    topics = Topics("acme.")
    assert [topics.name(t) for t in TOPICS] == [topics.name(t.name) for t in TOPICS] == topics.all()
    assert all(topic_named(t.name) is t for t in TOPICS)
    assert len(set(TOPIC_NAMES)) == len(TOPICS)


def test_each_topic_keys_its_records_as_documented() -> None:
    entry = ToolCatalogEntry(
        tool="search", kind="function", source="builtin", executor_id="x", available=True, heartbeat_s=30
    )
    assert TOOL_CATALOG.key_of(entry) == "search"
    frame = WebFrame(chat_id="page-1", message_id="m1", op=WebFrameOp.SEND, text="hi", final=True)
    assert WEB_FRAMES.key_of(frame) == "page-1"
    letter = DeadLetter(source_topic="t", raw_value="x", error="bad", service="ingress", key="web:a")
    assert DLQ.key_of(letter) == "web:a"
    assert DLQ.key_of(letter.model_copy(update={"key": None})) == ""  # a record that had no key


def test_topic_settings_compaction_or_retention() -> None:
    kafka = KafkaSettings(partitions=6, topic_prefix="p.")
    assert TOOL_CATALOG.config() == {"cleanup.policy": "compact"}  # compacted: no time limit
    assert DLQ.config() == {"retention.ms": str(30 * DAY_MS)}
    assert WEB_FRAMES.config() == {"retention.ms": str(DAY_MS)}
    assert EVENTS.config() == {"retention.ms": str(7 * DAY_MS)}
    assert (RUNS.partition_count(kafka), TOOL_CATALOG.partition_count(kafka)) == (6, 1)
    assert consumer_group(kafka, "agent-runner") == "p.agent-runner"


def test_min_insync_replicas_goes_on_every_topic_when_set() -> None:
    assert EVENTS.config(2) == {"retention.ms": str(7 * DAY_MS), "min.insync.replicas": "2"}
    assert TOOL_CATALOG.config(2) == {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    assert "min.insync.replicas" not in EVENTS.config(None)  # the broker's default


def test_min_insync_replicas_above_the_replication_factor_is_refused() -> None:
    assert KafkaSettings(replication_factor=3, min_insync_replicas=2).min_insync_replicas == 2
    with pytest.raises(ValueError, match="min_insync_replicas 3 exceeds kafka.replication_factor 2"):
        KafkaSettings(replication_factor=2, min_insync_replicas=3)
