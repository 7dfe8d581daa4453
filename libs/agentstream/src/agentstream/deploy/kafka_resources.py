"""Strimzi `KafkaTopic` and KEDA `ScaledObject` resources from the topic registry and a config file.

Both follow the config's `kafka` section (prefix, partitions, replication factor, bootstrap
servers), so topic sizes, consumer groups and the autoscalers' ceilings cannot drift from what
the services use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentstream.config import KafkaSettings
from agentstream.config.core import SaslMechanism
from agentstream.kafka.topics import EVENTS, INBOUND, RUNS, TOOL_RESULTS, TOPICS, Topic, Topics, consumer_group

STRIMZI_API = "kafka.strimzi.io/v1"
KEDA_API = "keda.sh/v1alpha1"
STRIMZI_BOOTSTRAP_SUFFIX = "-kafka-bootstrap"
# KEDA's Kafka scaler authenticates like the pods: its TriggerAuthentication reads these variables
# (and `kafka.sasl_password_env`) from the scaled Deployment's container, which gets them from Secrets.
TRIGGER_AUTH = "agentstream-kafka"
SASL_USERNAME_ENV = "KAFKA_SASL_USERNAME"
CA_CERT_ENV = "KAFKA_CA_CERT"
KEDA_SASL = {
    SaslMechanism.PLAIN: "plaintext",
    SaslMechanism.SCRAM_SHA_256: "scram_sha256",
    SaslMechanism.SCRAM_SHA_512: "scram_sha512",
}


@dataclass(frozen=True)
class LagScaling:
    """A service scaled on its consumer group's lag.

    `lag_per_replica` is KEDA's lagThreshold: the lag one replica is expected to carry. It is
    per record, and records differ in weight: one `runs` command is a whole model call, one
    `events` record a few tokens.
    """

    service: str
    topics: tuple[Topic[Any], ...]
    lag_per_replica: int


LAG_SCALED = (
    LagScaling("ingress", (INBOUND,), lag_per_replica=200),
    LagScaling("agent-runner", (RUNS, TOOL_RESULTS), lag_per_replica=20),
    LagScaling("delivery", (EVENTS,), lag_per_replica=2000),
)


def strimzi_cluster(kafka: KafkaSettings) -> str | None:
    """`<cluster>-kafka-bootstrap[.<ns>…]:<port>` → `<cluster>` (the KafkaTopic's owner label), or None
    when the bootstrap servers are not a Strimzi bootstrap Service (a Kafka of your own: then the
    `agentstream-init` Job creates the topics and no KafkaTopic is generated)."""
    first = kafka.bootstrap_servers.split(",")[0].strip()
    host = first.rsplit(":", 1)[0].split(".")[0]
    if not host.endswith(STRIMZI_BOOTSTRAP_SUFFIX) or host == STRIMZI_BOOTSTRAP_SUFFIX:
        return None
    return host.removesuffix(STRIMZI_BOOTSTRAP_SUFFIX)


def _resource_name(topic: str) -> str:
    """Kubernetes names are lower-case DNS labels; the topic's own name goes in spec.topicName."""
    return topic.replace(".", "-").replace("_", "-").lower().strip("-")


def kafka_topics(kafka: KafkaSettings) -> list[dict[str, Any]]:
    cluster = strimzi_cluster(kafka)
    if cluster is None:
        return []
    topics = Topics(kafka.topic_prefix)
    return [
        {
            "apiVersion": STRIMZI_API,
            "kind": "KafkaTopic",
            "metadata": {
                "name": _resource_name(topics.name(topic)),
                "labels": {"strimzi.io/cluster": cluster, "app.kubernetes.io/name": "agentstream"},
            },
            "spec": {
                "topicName": topics.name(topic),
                "partitions": topic.partition_count(kafka),
                "replicas": kafka.replication_factor,
                "config": topic.config(kafka.min_insync_replicas),
            },
        }
        for topic in TOPICS
    ]


def max_replicas(scaling: LagScaling, kafka: KafkaSettings) -> int:
    """More consumers than partitions of the input topic would sit idle."""
    return min(topic.partition_count(kafka) for topic in scaling.topics)


def _secured(kafka: KafkaSettings) -> bool:
    return kafka.security_protocol.uses_sasl or kafka.security_protocol.uses_tls


def trigger_authentications(kafka: KafkaSettings) -> list[dict[str, Any]]:
    """KEDA's credentials for a Kafka spoken over TLS and/or SASL (none for plaintext)."""
    if not _secured(kafka):
        return []
    env: list[dict[str, str]] = []
    if kafka.security_protocol.uses_sasl:
        assert kafka.sasl_password_env  # the settings refuse SASL without it
        env += [
            {"parameter": "username", "name": SASL_USERNAME_ENV},
            {"parameter": "password", "name": kafka.sasl_password_env},
        ]
    if kafka.security_protocol.uses_tls and kafka.ssl_cafile:
        env.append({"parameter": "ca", "name": CA_CERT_ENV})
    return [
        {
            "apiVersion": KEDA_API,
            "kind": "TriggerAuthentication",
            "metadata": {"name": TRIGGER_AUTH, "labels": {"app.kubernetes.io/name": "agentstream"}},
            "spec": {"env": env},
        }
    ]


def _trigger_security(kafka: KafkaSettings) -> dict[str, str]:
    if not _secured(kafka):
        return {}
    metadata = {"tls": "enable" if kafka.security_protocol.uses_tls else "disable"}
    if kafka.security_protocol.uses_sasl and kafka.sasl_mechanism is not None:
        metadata["sasl"] = KEDA_SASL[kafka.sasl_mechanism]
    return metadata


def scaled_objects(kafka: KafkaSettings) -> list[dict[str, Any]]:
    topics = Topics(kafka.topic_prefix)
    auth = {"authenticationRef": {"name": TRIGGER_AUTH}} if _secured(kafka) else {}
    return [
        {
            "apiVersion": KEDA_API,
            "kind": "ScaledObject",
            "metadata": {
                "name": f"agentstream-{scaling.service}",
                "labels": {"app.kubernetes.io/name": "agentstream", "app.kubernetes.io/component": scaling.service},
            },
            "spec": {
                "scaleTargetRef": {"name": f"agentstream-{scaling.service}"},
                "minReplicaCount": 1,
                "maxReplicaCount": max_replicas(scaling, kafka),
                # Rebalances move conversations between replicas: wait before scaling down.
                "cooldownPeriod": 300,
                "triggers": [
                    {
                        "type": "kafka",
                        "metadata": {
                            "bootstrapServers": kafka.bootstrap_servers,
                            "consumerGroup": consumer_group(kafka, scaling.service),
                            "topic": topics.name(topic),
                            "lagThreshold": str(scaling.lag_per_replica),
                            "allowIdleConsumers": "false",
                            **_trigger_security(kafka),
                        },
                        **auth,
                    }
                    for topic in scaling.topics
                ],
            },
        }
        for scaling in LAG_SCALED
    ]
