"""Flavor detection against the real embedded broker."""

from __future__ import annotations

from agentstream.config import KafkaFlavor, load_settings
from agentstream.kafka.flavor import detect_flavor, resolve_flavor, tuning
from agentstream_testing.brokers import flavor_under_test


async def test_the_test_broker_is_detected_as_its_flavor(kafka_bootstrap: str) -> None:
    kafka = load_settings(kafka={"bootstrap_servers": kafka_bootstrap}).kafka  # auto, not embedded
    assert await detect_flavor(kafka) is flavor_under_test()
    resolved = await resolve_flavor(kafka)
    assert resolved.flavor is flavor_under_test()
    assert tuning(resolved).idempotent is (flavor_under_test() is KafkaFlavor.KAFKA)
