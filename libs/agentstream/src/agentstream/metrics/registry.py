"""One Prometheus registry per service."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector


def new_registry() -> CollectorRegistry:
    """A service's registry with `process_*` (CPU, memory, open files), `python_info` and
    `python_gc_*` already in it: services of the embedded stack share one process, so their
    process figures are the same; deployed one per process they are the service's own."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
