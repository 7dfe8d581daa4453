"""Prometheus metrics of the hooks (one set per delivery service registry)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from agentstream.metrics.declare import counter, histogram


class HookMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        reg = registry if registry is not None else CollectorRegistry()  # None: private (tests)
        self.calls = counter(
            reg, "agentstream_hook_calls_total", "Hook calls by outcome (ok, error, timeout)", "hook", "kind", "outcome"
        )
        self.dropped = counter(reg, "agentstream_hook_dropped_total", "Events an observer's full queue dropped", "hook")
        self.duration = histogram(
            reg,
            "agentstream_hook_duration_seconds",
            "Hook call duration",
            "hook",
            "kind",
            buckets=(0.001, 0.005, 0.02, 0.1, 0.5, 2, 10),
        )
        self.fail_closed = counter(
            reg,
            "agentstream_hook_security_fail_closed_total",
            "Frames the security filter could not check (sent redacted or withheld)",
            "mode",
        )
