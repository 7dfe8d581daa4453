"""What the Kafka launcher writes and reads without starting a JVM: each node's server.properties,
the cluster id, the pinned version (tests/integration/lib/test_kafka_jvm.py starts real clusters)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from agentstream_testing import kafka_jvm
from agentstream_testing.kafka_jvm import KafkaNode, node_properties


def _node(node_id: int) -> KafkaNode:
    return KafkaNode(
        node_id, Path(f"/w/node-{node_id}"), broker_port=10_000 + node_id, controller_port=20_000 + node_id
    )


def test_one_node_is_broker_and_controller_on_loopback_with_internal_topics_on_one_replica() -> None:
    properties = node_properties(_node(1), "1@127.0.0.1:20001", cluster_size=1)
    assert properties["process.roles"] == "broker,controller"
    assert properties["listeners"] == "PLAINTEXT://127.0.0.1:10001,CONTROLLER://127.0.0.1:20001"
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:10001"
    assert properties["log.dirs"] == "/w/node-1/data"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor"):
        assert properties[key] == "1"
    assert properties["transaction.state.log.min.isr"] == "1"
    assert properties["auto.create.topics.enable"] == "false"
    assert properties["group.initial.rebalance.delay.ms"] == "0"


def test_three_nodes_replicate_the_internal_topics_thrice_and_need_two_in_sync() -> None:
    voters = "1@127.0.0.1:20001,2@127.0.0.1:20002,3@127.0.0.1:20003"
    for node_id in (1, 2, 3):
        properties = node_properties(_node(node_id), voters, cluster_size=3)
        assert properties["node.id"] == str(node_id)
        assert properties["controller.quorum.voters"] == voters
        assert properties["offsets.topic.replication.factor"] == "3"
        assert properties["share.coordinator.state.topic.min.isr"] == "2"


def test_a_cluster_has_one_node_or_three() -> None:
    with pytest.raises(ValueError, match="1 node or 3"):
        kafka_jvm.KafkaJvmCluster(nodes=2)


def test_cluster_ids_are_kraft_uuids_never_read_as_an_option() -> None:
    # One in 64 random ids starts with "-", which the storage tool took for an option (a session
    # failed on it): thousands drawn, none does.
    ids = [kafka_jvm.new_cluster_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert not [i for i in ids if i.startswith("-")]
    assert {len(i) for i in ids} == {22}
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)


def test_the_version_comes_from_the_pom_and_a_pom_without_it_is_refused(tmp_path: Path) -> None:
    assert kafka_jvm.pinned_version() == kafka_jvm.KAFKA_VERSION
    assert f"<kafka.version>{kafka_jvm.KAFKA_VERSION}</kafka.version>" in kafka_jvm.POM.read_text()
    bare = tmp_path / "pom.xml"
    bare.write_text('<project xmlns="http://maven.apache.org/POM/4.0.0"><properties/></project>')
    with pytest.raises(ValueError, match="has no <kafka.version> property"):
        kafka_jvm.pinned_version(bare)


def test_the_jars_live_in_the_user_cache_by_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kafka_jvm.jars_dir("9.9.9") == tmp_path / "agentstream" / "kafka-9.9.9" / "libs"
    assert not kafka_jvm.jars_ready("9.9.9")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert kafka_jvm.jars_dir("9.9.9") == Path.home() / ".cache" / "agentstream" / "kafka-9.9.9" / "libs"


def test_without_java_or_maven_the_reason_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no jars fetched there
    monkeypatch.setattr(kafka_jvm.shutil, "which", lambda name: None)
    assert kafka_jvm.jvm_missing() == "no `java` on PATH (install a Java 17+ runtime)"
    monkeypatch.setattr(kafka_jvm.shutil, "which", lambda name: "/usr/bin/java" if name == "java" else None)
    assert f"are not in {kafka_jvm.jars_dir()} and there is no `mvn` on PATH" in str(kafka_jvm.jvm_missing())
    with pytest.raises(RuntimeError, match="no `mvn` on PATH"):
        kafka_jvm.fetch_jars(say=lambda _: None)
