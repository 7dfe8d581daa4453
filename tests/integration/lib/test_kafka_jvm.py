"""Apache Kafka on the JVM (`agentstream_testing.kafka_jvm`), really started: one node produces and
consumes through a consumer group and stops; three nodes form a 3-voter quorum that keeps serving
with one node killed, and the killed node serves again once started on its data; the jars are
fetched with Maven into an empty cache; the test broker's path without Docker is this cluster,
detected as Apache Kafka; `python -m … run` serves until SIGTERM.

Whatever broker the rest of the run uses: these tests own their clusters. Each JVM is a few seconds
of CPU on start, so each test starts one cluster at most."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from agentstream.config import KafkaFlavor, load_settings
from agentstream.kafka.flavor import detect_flavor
from agentstream_testing import brokers, kafka_jvm
from agentstream_testing.kafka_jvm import KafkaJvmCluster, KafkaStartError

pytestmark = pytest.mark.skipif(kafka_jvm.jvm_missing() is not None, reason=f"{kafka_jvm.jvm_missing()}")


def _listening(bootstrap: str) -> bool:
    host, port = bootstrap.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


async def _create_topic(bootstrap: str, topic: str, partitions: int, replicas: int) -> list[int]:
    """Creates `topic`; returns the broker ids the cluster lists."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, replicas)])
        cluster = await admin.describe_cluster()
        return sorted(broker["node_id"] for broker in cluster["brokers"])
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    # As the services on Kafka: idempotent, every in-sync replica acknowledging.
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, key=value)
    finally:
        await producer.stop()


async def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """`count` values read through a new consumer group, committed."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest"
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(60):
            while len(values) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    values.extend(record.value for record in records if record.value is not None)
        await consumer.commit()
    finally:
        await consumer.stop()
    return values


async def test_one_node_produces_consumes_and_stops(tmp_path: Path) -> None:
    cluster = KafkaJvmCluster(nodes=1, workdir=tmp_path)
    await asyncio.to_thread(cluster.start)
    try:
        (node,) = cluster.nodes
        assert cluster.bootstrap_servers == f"127.0.0.1:{node.broker_port}"
        config = node.config_file.read_text()
        assert "process.roles=broker,controller\n" in config
        assert "auto.create.topics.enable=false\n" in config
        assert f"controller.quorum.voters=1@127.0.0.1:{node.controller_port}\n" in config

        assert await _create_topic(cluster.bootstrap_servers, "one", partitions=2, replicas=1) == [1]
        sent = [f"m{i}".encode() for i in range(10)]
        await _produce(cluster.bootstrap_servers, "one", sent)
        assert sorted(await _consume(cluster.bootstrap_servers, "one", len(sent))) == sorted(sent)
        # A topic nobody created stays absent (auto.create.topics.enable=false, as docker-compose.yml).
        probe = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
        await probe.start()
        try:
            assert "never-created" not in await probe.topics()
        finally:
            await probe.stop()
        process = node.process
        assert process is not None
    finally:
        cluster.stop()
    # SIGTERM: the JVM runs Kafka's shutdown hook, then exits 128 + 15 (not SIGKILL's -9).
    assert process.returncode == 143
    assert not _listening(cluster.bootstrap_servers)
    log = node.log_file.read_text()
    assert kafka_jvm.STARTED_LINE in log, "the node's log is kept"
    assert "[BrokerServer id=1] shutting down" in log, "a controlled shutdown"
    assert not node.data_dir.exists(), "the data is removed"


async def test_three_nodes_form_a_quorum_that_survives_one_node_killed(tmp_path: Path) -> None:
    cluster = KafkaJvmCluster(nodes=3, workdir=tmp_path)
    await asyncio.to_thread(cluster.start)
    try:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in cluster.nodes)
        for node in cluster.nodes:
            config = node.config_file.read_text()
            assert f"controller.quorum.voters={voters}\n" in config
            assert "offsets.topic.replication.factor=3\n" in config
            assert "transaction.state.log.min.isr=2\n" in config
        bootstrap = cluster.bootstrap_servers
        assert await _create_topic(bootstrap, "three", partitions=3, replicas=3) == [1, 2, 3]
        await _produce(bootstrap, "three", [b"before"])

        cluster.stop_node(3, signal.SIGKILL)  # one voter of three gone: the quorum still has a majority
        alive = ",".join(node.bootstrap for node in cluster.nodes if node.node_id != 3)
        await _produce(alive, "three", [b"after"])
        assert sorted(await _consume(alive, "three", 2)) == [b"after", b"before"]

        # Started again on its data and ports (its log already says "started" once): it serves again.
        await asyncio.to_thread(cluster.start_node, 3)
        assert cluster.nodes[2].log_file.read_text().count(kafka_jvm.STARTED_LINE) == 2
        await _produce(cluster.nodes[2].bootstrap, "three", [b"back"])
        assert sorted(await _consume(cluster.nodes[2].bootstrap, "three", 3)) == [b"after", b"back", b"before"]
        with pytest.raises(RuntimeError, match="Kafka node 3 is running"):
            cluster.start_node(3)
    finally:
        cluster.stop()
    assert not any(_listening(node.bootstrap) for node in cluster.nodes)


def test_a_node_that_does_not_start_in_time_is_stopped_and_its_log_shown(tmp_path: Path) -> None:
    cluster = KafkaJvmCluster(nodes=1, workdir=tmp_path, start_timeout_s=0.5)
    with pytest.raises(KafkaStartError, match="Kafka node 1 did not start in time") as raised:
        cluster.start()
    assert str(cluster.nodes[0].log_file) in str(raised.value)
    assert cluster.nodes[0].process is None, "stopped, not left running"


def test_the_jars_are_fetched_once_into_an_empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Maven's own repository (~/.m2) makes this quick once `make kafka` ran; the copy is what is tested.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    said: list[str] = []
    jars = kafka_jvm.fetch_jars(say=said.append)
    assert jars == tmp_path / "agentstream" / f"kafka-{kafka_jvm.KAFKA_VERSION}" / "libs"
    assert (jars / f"kafka_2.13-{kafka_jvm.KAFKA_VERSION}.jar").is_file()
    assert list(jars.glob("log4j-slf4j2-impl-*.jar")), "a logging backend: else the broker logs nothing"
    assert said[0].startswith(f"fetching Apache Kafka {kafka_jvm.KAFKA_VERSION}'s jars with Maven into {jars}")
    assert kafka_jvm.jars_ready()
    assert kafka_jvm.fetch_jars(say=said.append) == jars
    assert len(said) == 2, "the second call finds them: no second fetch"


async def test_without_docker_the_test_broker_is_this_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(brokers, "docker_missing", lambda: "no Docker engine answers (test)")
    context = brokers.apache_kafka(tmp_path)
    bootstrap = await asyncio.to_thread(context.__enter__)
    try:
        assert (tmp_path / "node-1" / "kafka.log").is_file()
        kafka = load_settings(kafka={"bootstrap_servers": bootstrap}).kafka
        assert await detect_flavor(kafka) is KafkaFlavor.KAFKA
    finally:
        context.__exit__(None, None, None)
    assert not _listening(bootstrap)


def test_the_run_command_serves_until_sigterm_then_stops_the_nodes() -> None:
    command = [sys.executable, "-m", "agentstream_testing.kafka_jvm", "run"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once the node started
        match = re.search(r"Apache Kafka (\S+) on (127\.0\.0\.1:\d+) \(logs in (\S+)\)", line)
        assert match, line
        assert match[1] == kafka_jvm.KAFKA_VERSION
        bootstrap, workdir = match[2], Path(match[3])
        assert _listening(bootstrap)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert not _listening(bootstrap)
    assert not workdir.exists(), "its own temp dir is removed"
