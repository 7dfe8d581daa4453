"""`Topics` (agentstream.kafka.topics): full topic names under one prefix."""

from __future__ import annotations

import pytest

from agentstream.kafka.topics import TOPIC_NAMES, Topics


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
        topics.dlq,
    ]
    assert named == [f"acme.{short}" for short in TOPIC_NAMES]
    assert topics.all() == named


def test_an_unknown_topic_is_refused() -> None:
    with pytest.raises(KeyError, match="unknown topic"):
        Topics("acme.").name("nope")
