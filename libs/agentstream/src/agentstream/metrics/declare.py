"""One line per metric: a metrics class declares each of its series as `name, help, *labels`
in the registry it is given, so the declarations of every service read as a table."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


def counter(registry: CollectorRegistry, name: str, documentation: str, *labels: str) -> Counter:
    return Counter(name, documentation, labels, registry=registry)


def gauge(registry: CollectorRegistry, name: str, documentation: str, *labels: str) -> Gauge:
    return Gauge(name, documentation, labels, registry=registry)


def histogram(
    registry: CollectorRegistry, name: str, documentation: str, *labels: str, buckets: Sequence[float]
) -> Histogram:
    return Histogram(name, documentation, labels, buckets=buckets, registry=registry)
