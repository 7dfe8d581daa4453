"""Broker factory: a FastStream `KafkaBroker` configured from settings.

Embedded (Tansu) mode: no idempotent producer (Tansu does not support it) and a
short fetch wait (Tansu answers fetches only when the wait expires).
"""

from __future__ import annotations

from typing import Any

from faststream.kafka import KafkaBroker
from faststream.kafka.prometheus import KafkaPrometheusMiddleware
from prometheus_client import CollectorRegistry

from agentstream.config import KafkaSettings


def make_broker(
    kafka: KafkaSettings, *, registry: CollectorRegistry | None = None, client_id: str | None = None
) -> KafkaBroker:
    middlewares: list[Any] = []
    if registry is not None:
        middlewares.append(KafkaPrometheusMiddleware(registry=registry, app_name=client_id or kafka.client_id))
    return KafkaBroker(
        kafka.bootstrap_servers,
        client_id=client_id or kafka.client_id,
        enable_idempotence=kafka.idempotence,
        acks="all",
        linger_ms=0,
        request_timeout_ms=15_000,
        middlewares=middlewares,
        logger=None,
    )


def consumer_options(kafka: KafkaSettings) -> dict[str, Any]:
    """Keyword arguments every subscriber of ours passes to `broker.subscriber`."""
    return {
        "fetch_max_wait_ms": kafka.fetch_wait_ms,
        "auto_offset_reset": "earliest",
    }
