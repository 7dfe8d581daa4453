"""agentstream.kafka.topics: full topic names under one prefix, each topic's broker settings, group names."""

from __future__ import annotations

import pytest

from agentstream.config import KafkaSettings
from agentstream.kafka.topics import DAY_MS, TOPIC_NAMES, Topics, consumer_group, topic_config, topic_partitions


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


def test_topic_settings_compaction_or_retention() -> None:
    kafka = KafkaSettings(partitions=6, topic_prefix="p.")
    assert topic_config("tool-catalog") == {"cleanup.policy": "compact"}  # compacted: no time limit
    assert topic_config("dlq") == {"retention.ms": str(30 * DAY_MS)}
    assert topic_config("events") == {"retention.ms": str(7 * DAY_MS)}
    assert (topic_partitions("runs", kafka), topic_partitions("tool-catalog", kafka)) == (6, 1)
    assert consumer_group(kafka, "agent-runner") == "p.agent-runner"


def test_min_insync_replicas_goes_on_every_topic_when_set() -> None:
    assert topic_config("events", 2) == {"retention.ms": str(7 * DAY_MS), "min.insync.replicas": "2"}
    assert topic_config("tool-catalog", 2) == {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    assert "min.insync.replicas" not in topic_config("events", None)  # the broker's default


def test_min_insync_replicas_above_the_replication_factor_is_refused() -> None:
    assert KafkaSettings(replication_factor=3, min_insync_replicas=2).min_insync_replicas == 2
    with pytest.raises(ValueError, match="min_insync_replicas 3 exceeds kafka.replication_factor 2"):
        KafkaSettings(replication_factor=2, min_insync_replicas=3)
