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
from agentstream.config.core import SaslMechanism, SecurityProtocol
from agentstream.deploy.kafka_resources import CA_CERT_ENV, LAG_SCALED, SASL_USERNAME_ENV, strimzi_cluster
from agentstream.kafka.flavor import tuning
from agentstream.kafka.topics import TOPIC_NAMES, Topics, consumer_group
from tests.unit.deploy.conftest import BASE, K8S, OVERLAYS, by_kind, rendered
from tests.unit.deploy.test_k8s_base import K8S_VERSIONS, KINDS, validate

NAMESPACES = {"dev": "agentstream-dev", "prod": "agentstream"}
PROD_SECURITY = {
    "bootstrap_servers",
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password_env",
    "ssl_cafile",
}


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
    # KEDA's credentials where Kafka is spoken over SASL_SSL (prod), none for plaintext (dev).
    extra += ["TriggerAuthentication"] if overlay == "prod" else []
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
    # Sizes differ per overlay; prod also speaks SASL_SSL on the TLS listener.
    differs = {"partitions", "replication_factor", "min_insync_replicas"} | (
        PROD_SECURITY if overlay == "prod" else set()
    )
    assert settings.kafka.model_dump(exclude=differs) == base.kafka.model_dump(exclude=differs)
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
        min_isr = None if kafka.min_insync_replicas is None else str(kafka.min_insync_replicas)
        assert topic["spec"]["config"].get("min.insync.replicas") == min_isr
    assert topics[names.runs]["spec"]["partitions"] == kafka.partitions


def test_prod_has_the_kafka_settings_the_failover_tests_prove(tmp_path: Path) -> None:
    # tests/chaos/test_chaos_kafka_failover.py: a leader killed, every broker restarted in turn, nothing
    # lost, with these settings (docs/deploy.md "Kafka settings for production").
    kafka = overlay_config("prod", tmp_path).kafka
    assert (kafka.replication_factor, kafka.min_insync_replicas) == (3, 2)
    assert (tuning(kafka).idempotent, tuning(kafka).acks) == (True, "all")
    assert kafka.security_protocol is SecurityProtocol.SASL_SSL
    topics = by_kind(rendered("overlays/prod"), "KafkaTopic").values()
    assert {(t["spec"]["replicas"], t["spec"]["config"]["min.insync.replicas"]) for t in topics} == {(3, "2")}
    # A single-broker dev cluster cannot hold 2 replicas of anything.
    dev = overlay_config("dev", tmp_path).kafka
    assert (dev.replication_factor, dev.min_insync_replicas) == (1, None)


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
        port = {"dev": 9092, "prod": 9093}[overlay]
        assert kafka.bootstrap_servers == f"{strimzi_cluster(kafka)}-kafka-bootstrap:{port}"
        assert kafka.in_memory is False and kafka.auto_create_topics is False


def test_plaintext_only_in_dev_and_prod_speaks_sasl_ssl(tmp_path: Path) -> None:
    assert overlay_config("dev", tmp_path).kafka.security_protocol is SecurityProtocol.PLAINTEXT
    kafka = overlay_config("prod", tmp_path).kafka
    assert kafka.security_protocol is SecurityProtocol.SASL_SSL
    assert kafka.sasl_mechanism is SaslMechanism.SCRAM_SHA_512 and kafka.ssl_cafile and kafka.sasl_password_env


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def test_prod_every_kafka_client_gets_its_password_and_ca_from_secrets(tmp_path: Path) -> None:
    """The password named by kafka.sasl_password_env comes from a Secret (never the ConfigMap), and
    the file kafka.ssl_cafile is mounted from the cluster CA's Secret, in every pod that speaks Kafka."""
    kafka = overlay_config("prod", tmp_path).kafka
    assert kafka.sasl_password_env and kafka.ssl_cafile
    docs = rendered("overlays/prod")
    workloads = [*by_kind(docs, "Deployment").values(), *by_kind(docs, "Job").values()]
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        # The init Job speaks to Kafka in its init container `topics`.
        container = pod["initContainers"][0] if workload["kind"] == "Job" else pod["containers"][0]
        env = _env(container)
        name = workload["metadata"]["name"]
        assert env[kafka.sasl_password_env]["valueFrom"]["secretKeyRef"]["key"] == "password", name
        assert env[SASL_USERNAME_ENV]["value"] == kafka.sasl_username, name
        assert "secretKeyRef" in env[CA_CERT_ENV]["valueFrom"], name
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        (ca,) = [m for m in mounts.values() if kafka.ssl_cafile.startswith(m["mountPath"] + "/")]
        assert ca["readOnly"] is True
        secret = volumes[ca["name"]]["secret"]
        assert [item["path"] for item in secret["items"]] == [kafka.ssl_cafile.rsplit("/", 1)[1]], name


def test_prod_autoscalers_authenticate_with_what_the_scaled_pods_have(tmp_path: Path) -> None:
    docs = rendered("overlays/prod")
    (auth,) = by_kind(docs, "TriggerAuthentication").values()
    deployments = by_kind(docs, "Deployment")
    for scaled in by_kind(docs, "ScaledObject").values():
        env = _env(deployments[scaled["spec"]["scaleTargetRef"]["name"]]["spec"]["template"]["spec"]["containers"][0])
        for trigger in scaled["spec"]["triggers"]:
            assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
            assert (trigger["metadata"]["sasl"], trigger["metadata"]["tls"]) == ("scram_sha512", "enable")
        # KEDA resolves each parameter from the scaled Deployment's container.
        assert {p["name"] for p in auth["spec"]["env"]} <= set(env)
    assert {p["parameter"] for p in auth["spec"]["env"]} == {"username", "password", "ca"}
    assert not by_kind(rendered("overlays/dev"), "TriggerAuthentication")


def test_every_overlay_file_is_listed() -> None:
    for overlay in OVERLAYS:
        directory = K8S / "overlays" / overlay
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        listed = {r for r in kustomization["resources"] if not r.startswith("..")} | {
            f.split("=")[-1] for g in kustomization["configMapGenerator"] for f in g["files"]
        }
        assert {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"} == listed
