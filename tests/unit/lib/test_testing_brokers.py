"""Which broker and PostgreSQL the tests choose, and what they say when they cannot have them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentstream.config import KafkaFlavor
from agentstream.testing import brokers
from agentstream.testing.fixtures import make_test_settings

COMPOSE = Path(__file__).resolve().parents[3] / "docker-compose.yml"


def test_tansu_is_the_default_and_kafka_is_chosen_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(brokers.TEST_BROKER_ENV, raising=False)
    assert brokers.flavor_under_test() is KafkaFlavor.TANSU
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "Kafka")
    assert brokers.flavor_under_test() is KafkaFlavor.KAFKA
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "redpanda")
    with pytest.raises(ValueError, match="choose tansu or kafka"):
        brokers.flavor_under_test()


def test_kafka_without_docker_is_unavailable_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "kafka")
    monkeypatch.delenv(brokers.TEST_BOOTSTRAP_ENV, raising=False)
    monkeypatch.setattr(brokers, "docker_missing", lambda: "no Docker engine answers (DockerException)")
    reason = brokers.broker_unavailable()
    assert reason == "AGENTSTREAM_TEST_BROKER=kafka needs a Docker engine: no Docker engine answers (DockerException)"
    assert reason in brokers.broker_description()


def test_kafka_with_docker_or_a_given_broker_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "kafka")
    monkeypatch.delenv(brokers.TEST_BOOTSTRAP_ENV, raising=False)
    monkeypatch.setattr(brokers, "docker_missing", lambda: None)
    assert brokers.broker_unavailable() is None
    assert brokers.KAFKA_IMAGE in brokers.broker_description()
    monkeypatch.setattr(brokers, "docker_missing", lambda: "none")
    monkeypatch.setenv(brokers.TEST_BOOTSTRAP_ENV, "kafka-1:9092")
    assert brokers.broker_unavailable() is None
    assert "kafka-1:9092" in brokers.broker_description()


def test_tansu_never_needs_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "tansu")
    monkeypatch.setattr(brokers, "docker_missing", lambda: "none")
    assert brokers.broker_unavailable() is None
    assert "embedded Tansu" in brokers.broker_description()


def test_test_settings_follow_the_broker_under_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "kafka")
    kafka = make_test_settings("127.0.0.1:9092", "t.", "sqlite+aiosqlite:///:memory:").kafka
    assert (kafka.flavor, kafka.embedded) == (KafkaFlavor.KAFKA, False)
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "tansu")
    kafka = make_test_settings("127.0.0.1:9092", "t.", "sqlite+aiosqlite:///:memory:").kafka
    assert (kafka.flavor, kafka.embedded) == (KafkaFlavor.TANSU, True)


def test_containers_use_the_images_of_docker_compose() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert services["kafka"]["image"] == brokers.KAFKA_IMAGE
    assert services["postgres"]["image"] == brokers.POSTGRES_IMAGE
