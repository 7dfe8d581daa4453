"""Broker factory: a FastStream `KafkaBroker` configured from settings.

TLS/SASL come from `kafka.security_protocol` and friends (`agentstream.kafka.security`).
What differs between Tansu and Kafka (idempotence, acks, fetch wait) comes from
`agentstream.kafka.flavor`.

Handlers get the message itself, undecoded and without dependency injection: every
handler of ours takes one `KafkaMessage` and decodes the body with its own pydantic
adapter. FastStream's way to receive the message — the `KafkaMessage` annotation, a
context field — is resolved by fast_depends in a worker thread for every record (a
thread hop and a task group per record, ~20% of the runner's CPU per run), and the
default decoder JSON-parses each body that the handler then parses again.
"""

from __future__ import annotations

import logging
from typing import Any

from faststream.kafka import KafkaBroker
from faststream.kafka.message import KafkaMessage
from faststream.kafka.prometheus import KafkaPrometheusMiddleware
from prometheus_client import CollectorRegistry

from agentstream.config import KafkaSettings
from agentstream.kafka.flavor import CONSUMER_TIMEOUT_MS, tuning
from agentstream.kafka.producer import KeyPartitioner
from agentstream.kafka.security import broker_security

FASTSTREAM_LOGGER = logging.getLogger("faststream")


def make_broker(
    kafka: KafkaSettings,
    *,
    registry: CollectorRegistry | None = None,
    client_id: str | None = None,
    telemetry: Any | None = None,
) -> KafkaBroker:
    """`telemetry`: the tracing middleware (agentstream.tracing), outermost, so a handler's span
    covers the other middlewares and the handler's own spans and records are its children."""
    broker_tuning = tuning(kafka)
    middlewares: list[Any] = [] if telemetry is None else [telemetry]
    if registry is not None:
        middlewares.append(KafkaPrometheusMiddleware(registry=registry, app_name=client_id or kafka.client_id))
    return KafkaBroker(
        bootstrap_list(kafka),
        client_id=client_id or kafka.client_id,
        enable_idempotence=broker_tuning.idempotent,
        acks=broker_tuning.acks,
        linger_ms=0,
        partitioner=KeyPartitioner(),
        request_timeout_ms=15_000,
        security=broker_security(kafka),
        middlewares=middlewares,
        # FastStream's own lines (connects, subscriber start, a failure outside our handler
        # guard) go through the structured logging; its per-record lines are DEBUG (the
        # "faststream" logger is kept at WARNING, see observability.QUIET_LOGGERS).
        logger=FASTSTREAM_LOGGER,
        log_level=logging.DEBUG,
        apply_types=False,
        decoder=the_message_itself,
    )


def bootstrap_list(kafka: KafkaSettings) -> list[str]:
    """`kafka.bootstrap_servers` as one `host:port` per broker. FastStream wraps a string in a list
    as it is, and aiokafka splits only a string at commas: "a:9092,b:9092" given as such reached
    aiokafka as one host named "a:9092,b", and a service could not start on a cluster's list."""
    return [server.strip() for server in kafka.bootstrap_servers.split(",") if server.strip()]


async def the_message_itself(message: KafkaMessage) -> KafkaMessage:
    """The decoder of every subscriber: the handler receives the `KafkaMessage` (or the
    batch's message) and decodes its body itself."""
    return message


def consumer_options(kafka: KafkaSettings) -> dict[str, Any]:
    """Keyword arguments every subscriber of ours passes to `broker.subscriber`."""
    return {
        "fetch_max_wait_ms": tuning(kafka).fetch_max_wait_ms,
        "consumer_timeout_ms": CONSUMER_TIMEOUT_MS,
        "auto_offset_reset": "earliest",
    }
