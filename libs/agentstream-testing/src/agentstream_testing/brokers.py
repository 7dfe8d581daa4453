"""The Kafka broker and PostgreSQL server the integration, e2e and chaos tests run against.

Kafka: ``AGENTSTREAM_TEST_BROKER`` is ``tansu`` (default: the embedded broker) or ``kafka``
(Apache Kafka in KRaft mode, the version of docker-compose.yml's image: in a testcontainers
container where a Docker engine answers, else on the JVM from its Maven artifacts,
`agentstream_testing.kafka_jvm`); ``AGENTSTREAM_TEST_BOOTSTRAP`` names a broker already
running instead (its flavor is still ``AGENTSTREAM_TEST_BROKER``'s).
PostgreSQL: ``AGENTSTREAM_TEST_PG``, else the local server, else a container where Docker is.
Kafka with neither Docker nor Java is left out with one reason.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentstream.config import KafkaFlavor
from agentstream_testing.kafka_jvm import KAFKA_VERSION, KafkaJvmCluster, jars_dir, jvm_missing

TEST_BROKER_ENV = "AGENTSTREAM_TEST_BROKER"
TEST_BOOTSTRAP_ENV = "AGENTSTREAM_TEST_BOOTSTRAP"
TEST_PG_ENV = "AGENTSTREAM_TEST_PG"
LOCAL_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
# The images of docker-compose.yml (tests/unit/lib/test_testing_brokers.py keeps them equal); Kafka's
# version is the one kafka_jvm's pom pins.
KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
POSTGRES_IMAGE = "postgres:16"
CONTAINER_START_TIMEOUT_S = 120


def flavor_under_test() -> KafkaFlavor:
    """The broker the tests run against, from ``AGENTSTREAM_TEST_BROKER``."""
    value = os.environ.get(TEST_BROKER_ENV, KafkaFlavor.TANSU.value).strip().lower()
    if value not in (KafkaFlavor.TANSU, KafkaFlavor.KAFKA):
        raise ValueError(f"{TEST_BROKER_ENV}={value!r}: choose tansu or kafka")
    return KafkaFlavor(value)


@functools.cache
def docker_missing() -> str | None:
    """Why no container can be started here, or None when a Docker engine answers."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as err:
        return f"no Docker engine answers ({type(err).__name__}; set DOCKER_HOST or start one)"
    return None


def kafka_on_jvm() -> bool:
    """Whether Apache Kafka runs on the JVM here rather than in Docker: no Docker engine answers."""
    return docker_missing() is not None


def broker_unavailable() -> str | None:
    """Why the broker asked for cannot be had here (Kafka with neither Docker nor Java), or None."""
    if os.environ.get(TEST_BOOTSTRAP_ENV) or flavor_under_test() is KafkaFlavor.TANSU:
        return None
    if (no_docker := docker_missing()) and (no_jvm := jvm_missing()):
        return f"{TEST_BROKER_ENV}=kafka needs a Docker engine or Java: {no_docker}; {no_jvm}"
    return None


def broker_description() -> str:
    """One line for the test report's header: which broker, and why not when it cannot be had."""
    if external := os.environ.get(TEST_BOOTSTRAP_ENV):
        return f"agentstream test broker: {flavor_under_test().value} at {external} ({TEST_BOOTSTRAP_ENV})"
    if flavor_under_test() is KafkaFlavor.TANSU:
        return f"agentstream test broker: embedded Tansu ({TEST_BROKER_ENV}=kafka for Apache Kafka)"
    if reason := broker_unavailable():
        return f"agentstream test broker: NONE, the tests that need one are skipped ({reason})"
    if kafka_on_jvm():
        return f"agentstream test broker: Apache Kafka {KAFKA_VERSION} (KRaft) on the JVM, jars in {jars_dir()}"
    return f"agentstream test broker: Apache Kafka {KAFKA_IMAGE} (KRaft) in Docker"


def _container_classes() -> tuple[type, type]:
    # Imported when a container is wanted: testcontainers is a dev dependency.
    from testcontainers.community.kafka import KafkaContainer
    from testcontainers.community.postgres import PostgresContainer

    return KafkaContainer, PostgresContainer


def apache_kafka_container(image: str = KAFKA_IMAGE) -> object:
    """testcontainers' `KafkaContainer`, set up for the apache/kafka image in KRaft mode (its
    own start script and KRaft switch assume Confluent's image and tags)."""
    kafka_container, _ = _container_classes()

    class ApacheKafkaContainer(kafka_container):  # type: ignore[misc, valid-type]
        def configure(self) -> None:
            self.kraft_enabled = True
            self.wait_for = re.compile(r".*Kafka Server started.*")
            self.with_env("CLUSTER_ID", self.cluster_id)
            self.with_env("KAFKA_NODE_ID", "1")
            self.with_env("KAFKA_PROCESS_ROLES", "broker,controller")
            self.with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9094")
            self.with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
            self.with_env("KAFKA_LISTENERS", f"{self.listeners},CONTROLLER://0.0.0.0:9094")
            self.with_env("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", f"{self.security_protocol_map},CONTROLLER:PLAINTEXT")
            self.with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
            self.with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
            # As in docker-compose.yml: topics exist only when created, with explicit partitions.
            self.with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false")

        def tc_start(self) -> None:
            host, port = self.get_container_host_ip(), self.get_exposed_port(self.port)
            advertised = f"{self.listener_name}://{host}:{port},BROKER://$(hostname -i | cut -d' ' -f1):9092"
            script = f"#!/bin/sh\nexport KAFKA_ADVERTISED_LISTENERS={advertised}\nexec /etc/kafka/docker/run\n"
            self.create_file(script.encode(), self.TC_START_SCRIPT)

    return ApacheKafkaContainer(image)


@contextmanager
def kafka_in_docker(image: str = KAFKA_IMAGE) -> Iterator[str]:
    """Apache Kafka in a container for as long as the block runs; yields its bootstrap servers."""
    container = apache_kafka_container(image)
    container.start(timeout=CONTAINER_START_TIMEOUT_S)  # type: ignore[attr-defined]
    try:
        yield str(container.get_bootstrap_server())  # type: ignore[attr-defined]
    finally:
        container.stop()  # type: ignore[attr-defined]


@contextmanager
def apache_kafka(workdir: Path) -> Iterator[str]:
    """Apache Kafka for as long as the block runs, in Docker where a Docker engine answers, else a
    1-node cluster on the JVM (its nodes' logs under `workdir`); yields its bootstrap servers."""
    if not kafka_on_jvm():
        with kafka_in_docker() as bootstrap:
            yield bootstrap
        return
    with KafkaJvmCluster(nodes=1, workdir=workdir) as cluster:
        yield cluster.bootstrap_servers


@contextmanager
def postgres_in_docker(image: str = POSTGRES_IMAGE) -> Iterator[str]:
    """PostgreSQL in a container; yields an admin URL (``postgresql://…``) like ``AGENTSTREAM_TEST_PG``.

    Trust authentication, as the local test server: tests connect with other passwords or none."""
    _, postgres_container = _container_classes()
    container = postgres_container(image, username="postgres", password="test", dbname="test")
    with container.with_env("POSTGRES_HOST_AUTH_METHOD", "trust") as pg:
        yield str(pg.get_connection_url(driver=None))
