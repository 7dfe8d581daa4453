"""The dev and prod overlays: `kubectl kustomize` renders each, every resource validates (Kubernetes'
kinds with kubernetes-validate, KEDA, Strimzi and Prometheus Operator kinds with their CRD
schemas), and the pieces agree: the config the pods read, the Strimzi cluster and topics, the
autoscalers' groups, topics and ceilings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agentstream.config import load_settings
from agentstream.deploy.kafka_resources import LAG_SCALED, strimzi_cluster
from agentstream.kafka.topics import TOPIC_NAMES, Topics, consumer_group
from tests.unit.deploy.conftest import BASE, K8S, OVERLAYS, by_kind, rendered
from tests.unit.deploy.test_k8s_base import K8S_VERSIONS, KINDS, validate

NAMESPACES = {"dev": "agentstream-dev", "prod": "agentstream"}


def overlay_config(overlay: str, tmp_path: Path) -> Any:
    """The settings the overlay's pods read: the rendered ConfigMap's file."""
    (config_map,) = by_kind(rendered(f"overlays/{overlay}"), "ConfigMap").values()
    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    return load_settings(path)


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_validates(overlay: str, version: str) -> None:
    docs = rendered(f"overlays/{overlay}")
    extra = ["KafkaTopic"] * len(TOPIC_NAMES) + ["ScaledObject"] * len(LAG_SCALED)
    assert sorted(d["kind"] for d in docs) == sorted(KINDS + extra)
    for doc in docs:
        validate(doc, version)
        # Every kind here is namespaced: the overlay puts all of them in its namespace.
        assert doc["metadata"]["namespace"] == NAMESPACES[overlay], doc["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_config_differs_from_the_base_only_in_kafka(overlay: str, tmp_path: Path) -> None:
    settings = overlay_config(overlay, tmp_path)
    base = load_settings(BASE / "agentstream.yaml")
    assert settings.model_dump(exclude={"kafka"}) == base.model_dump(exclude={"kafka"})
    assert settings.kafka.model_dump(exclude={"partitions", "replication_factor"}) == base.kafka.model_dump(
        exclude={"partitions", "replication_factor"}
    )
    # Every pod reads that ConfigMap (kustomize renamed it with its content hash).
    docs = rendered(f"overlays/{overlay}")
    (name,) = by_kind(docs, "ConfigMap")
    for workload in [*by_kind(docs, "Deployment").values(), *by_kind(docs, "Job").values()]:
        volumes = workload["spec"]["template"]["spec"]["volumes"]
        assert {"name": "config", "configMap": {"name": name}} in volumes


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_topics_belong_to_the_cluster_the_pods_use(overlay: str, tmp_path: Path) -> None:
    kafka = overlay_config(overlay, tmp_path).kafka
    topics = {t["spec"]["topicName"]: t for t in by_kind(rendered(f"overlays/{overlay}"), "KafkaTopic").values()}
    names = Topics(kafka.topic_prefix)
    assert set(topics) == {names.name(s) for s in TOPIC_NAMES}
    for topic in topics.values():
        assert topic["metadata"]["labels"]["strimzi.io/cluster"] == strimzi_cluster(kafka)
        assert topic["spec"]["replicas"] == kafka.replication_factor
    assert topics[names.runs]["spec"]["partitions"] == kafka.partitions


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_autoscalers_stay_within_their_input_partitions(overlay: str, tmp_path: Path) -> None:
    kafka = overlay_config(overlay, tmp_path).kafka
    docs = rendered(f"overlays/{overlay}")
    partitions = {t["spec"]["topicName"]: t["spec"]["partitions"] for t in by_kind(docs, "KafkaTopic").values()}
    deployments = by_kind(docs, "Deployment")
    scaled = by_kind(docs, "ScaledObject")
    assert {s["spec"]["scaleTargetRef"]["name"] for s in scaled.values()} == {
        f"agentstream-{s}" for s in ("ingress", "agent-runner", "delivery")
    }
    for obj in scaled.values():
        spec = obj["spec"]
        target = spec["scaleTargetRef"]["name"]
        assert target in deployments and "replicas" not in deployments[target]["spec"]
        service = target.removeprefix("agentstream-")
        inputs = [t["metadata"]["topic"] for t in spec["triggers"]]
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= min(partitions[t] for t in inputs)
        for trigger in spec["triggers"]:
            assert trigger["type"] == "kafka"
            assert trigger["metadata"]["consumerGroup"] == consumer_group(kafka, service)
            assert trigger["metadata"]["bootstrapServers"] == kafka.bootstrap_servers


def test_prod_keeps_two_of_everything() -> None:
    docs = rendered("overlays/prod")
    assert {s["spec"]["minReplicaCount"] for s in by_kind(docs, "ScaledObject").values()} == {2}
    fixed = {n: d["spec"].get("replicas") for n, d in by_kind(docs, "Deployment").items()}
    assert fixed["agentstream-tool-executor"] == fixed["agentstream-persistence"] == 2


def test_overlays_point_at_a_strimzi_bootstrap_service(tmp_path: Path) -> None:
    for overlay in OVERLAYS:
        kafka = overlay_config(overlay, tmp_path).kafka
        assert kafka.bootstrap_servers == f"{strimzi_cluster(kafka)}-kafka-bootstrap:9092"
        assert kafka.in_memory is False and kafka.auto_create_topics is False


def test_every_overlay_file_is_listed() -> None:
    for overlay in OVERLAYS:
        directory = K8S / "overlays" / overlay
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        listed = {r for r in kustomization["resources"] if not r.startswith("..")} | {
            f.split("=")[-1] for g in kustomization["configMapGenerator"] for f in g["files"]
        }
        assert {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"} == listed
