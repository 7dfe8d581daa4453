"""Which broker and PostgreSQL the tests choose, and what they say when they cannot have them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentstream.config import KafkaFlavor
from agentstream_testing import brokers, kafka_jvm
from agentstream_testing.fixtures import make_test_settings

COMPOSE = Path(__file__).resolve().parents[3] / "docker-compose.yml"


def test_tansu_is_the_default_and_kafka_is_chosen_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(brokers.TEST_BROKER_ENV, raising=False)
    assert brokers.flavor_under_test() is KafkaFlavor.TANSU
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "Kafka")
    assert brokers.flavor_under_test() is KafkaFlavor.KAFKA
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "redpanda")
    with pytest.raises(ValueError, match="choose tansu or kafka"):
        brokers.flavor_under_test()


def test_kafka_without_docker_nor_java_is_unavailable_with_both_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "kafka")
    monkeypatch.delenv(brokers.TEST_BOOTSTRAP_ENV, raising=False)
    monkeypatch.setattr(brokers, "docker_missing", lambda: "no Docker engine answers (DockerException)")
    monkeypatch.setattr(brokers, "jvm_missing", lambda: "no `java` on PATH")
    reason = brokers.broker_unavailable()
    assert reason == (
        "AGENTSTREAM_TEST_BROKER=kafka needs a Docker engine or Java: "
        "no Docker engine answers (DockerException); no `java` on PATH"
    )
    assert reason in brokers.broker_description()


def test_kafka_without_docker_runs_on_the_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "kafka")
    monkeypatch.delenv(brokers.TEST_BOOTSTRAP_ENV, raising=False)
    monkeypatch.setattr(brokers, "docker_missing", lambda: "no Docker engine answers (DockerException)")
    monkeypatch.setattr(brokers, "jvm_missing", lambda: None)
    assert brokers.broker_unavailable() is None
    assert brokers.kafka_on_jvm()
    description = brokers.broker_description()
    assert f"Apache Kafka {kafka_jvm.KAFKA_VERSION} (KRaft) on the JVM" in description
    assert str(kafka_jvm.jars_dir()) in description


def test_kafka_with_docker_or_a_given_broker_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "kafka")
    monkeypatch.delenv(brokers.TEST_BOOTSTRAP_ENV, raising=False)
    monkeypatch.setattr(brokers, "docker_missing", lambda: None)
    assert brokers.broker_unavailable() is None
    assert not brokers.kafka_on_jvm()
    assert brokers.KAFKA_IMAGE in brokers.broker_description()
    monkeypatch.setattr(brokers, "docker_missing", lambda: "none")
    monkeypatch.setattr(brokers, "jvm_missing", lambda: "none")
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
    assert (kafka.flavor, kafka.in_memory) == (KafkaFlavor.KAFKA, False)
    monkeypatch.setenv(brokers.TEST_BROKER_ENV, "tansu")
    kafka = make_test_settings("127.0.0.1:9092", "t.", "sqlite+aiosqlite:///:memory:").kafka
    assert (kafka.flavor, kafka.in_memory) == (KafkaFlavor.TANSU, True)


def test_containers_use_the_images_of_docker_compose() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert services["kafka"]["image"] == brokers.KAFKA_IMAGE
    assert services["postgres"]["image"] == brokers.POSTGRES_IMAGE


def test_the_jvm_broker_is_the_version_of_the_image() -> None:
    # One Kafka version: the pom's (what `make kafka` fetches) is the image's of docker-compose.yml.
    assert kafka_jvm.pinned_version() == kafka_jvm.KAFKA_VERSION
    assert f"apache/kafka:{kafka_jvm.pinned_version()}" == brokers.KAFKA_IMAGE
    assert kafka_jvm.KAFKA_VERSION.split(".")[0] == "4", "Kafka 4.x: KRaft only, as the launcher assumes"


class _NoDocker:
    """Stands in for testcontainers' Docker client: building a container object asks nothing of Docker."""

    def __init__(self, **kwargs: object) -> None:
        pass


def test_the_kafka_container_runs_the_apache_image_in_kraft_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("testcontainers.core.container.DockerClient", _NoDocker)
    container = brokers.apache_kafka_container()
    container.configure()  # type: ignore[attr-defined]
    env = container.env  # type: ignore[attr-defined]
    assert container.image == brokers.KAFKA_IMAGE  # type: ignore[attr-defined]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@localhost:9094"
    assert "CONTROLLER://0.0.0.0:9094" in env["KAFKA_LISTENERS"]
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].endswith("CONTROLLER:PLAINTEXT")
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert container.wait_for.match("[KafkaRaftServer nodeId=1] Kafka Server started")  # type: ignore[attr-defined]

    written: dict[str, bytes] = {}
    monkeypatch.setattr(container, "get_container_host_ip", lambda: "localhost")
    monkeypatch.setattr(container, "get_exposed_port", lambda port: 32771)
    monkeypatch.setattr(container, "create_file", lambda content, path: written.update({path: content}))
    container.tc_start()  # type: ignore[attr-defined]
    script = written[container.TC_START_SCRIPT].decode()  # type: ignore[attr-defined]
    # The host reaches the broker on the mapped port; the apache image's own launcher starts it.
    assert "KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:32771,BROKER://" in script
    assert script.rstrip().endswith("exec /etc/kafka/docker/run")
    assert "/etc/confluent" not in script


@pytest.mark.parametrize(
    ("broker", "jars_ready", "on_jvm", "fetches"),
    [
        ("kafka", False, True, True),  # Kafka on the JVM, no jars yet: fetched before any test
        ("kafka", True, True, False),  # already fetched
        ("kafka", False, False, False),  # Docker answers: the image, no jars
        ("tansu", False, True, False),  # no Kafka at all
    ],
)
def test_the_session_fetches_the_jars_only_for_kafka_on_the_jvm(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    broker: str,
    jars_ready: bool,
    on_jvm: bool,
    fetches: bool,
) -> None:
    from agentstream_testing import fixtures

    monkeypatch.setenv(brokers.TEST_BROKER_ENV, broker)
    monkeypatch.delenv(brokers.TEST_BOOTSTRAP_ENV, raising=False)
    monkeypatch.setattr(fixtures, "jars_ready", lambda: jars_ready)
    monkeypatch.setattr(fixtures, "kafka_on_jvm", lambda: on_jvm)
    monkeypatch.setattr(fixtures, "broker_unavailable", lambda: None)
    said_with: list[object] = []
    monkeypatch.setattr(fixtures, "fetch_jars", lambda say: said_with.append(say))
    fixtures.pytest_sessionstart(request.session)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    assert said_with == ([reporter.write_line if reporter else print] if fetches else [])
