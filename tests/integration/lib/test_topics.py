"""`create_topics` against the embedded broker: partitions, compaction and retention from the registry."""

from __future__ import annotations

import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from agentstream.kafka import Topics
from agentstream.kafka.topics import TOPICS, admin_client
from agentstream_testing.fixtures import make_test_settings

pytestmark = pytest.mark.integration


async def test_topics_are_created_with_the_registry_settings(kafka_bootstrap: str, topics_created: str) -> None:
    kafka = make_test_settings(kafka_bootstrap, topics_created, "sqlite+aiosqlite:///:memory:").kafka
    topics = Topics(topics_created)
    admin = admin_client(kafka)
    await admin.start()
    try:
        described = {t["topic"]: t for t in await admin.describe_topics(topics.all())}
        resources = [ConfigResource(ConfigResourceType.TOPIC, topics.name(t)) for t in TOPICS]
        configs: dict[str, dict[str, str]] = {}
        for response in await admin.describe_configs(resources):
            for _code, _msg, _type, name, entries in response.resources:
                configs[name] = {entry[0]: entry[1] for entry in entries}
    finally:
        await admin.close()
    for topic in TOPICS:
        name = topics.name(topic)
        assert len(described[name]["partitions"]) == topic.partition_count(kafka), name
        for key, value in topic.config().items():
            assert configs[name].get(key) == value, (name, key, configs[name].get(key))
