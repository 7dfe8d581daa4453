"""Delivery's metrics: platform calls and their latency, degraded streams, ledger writes, and how
long a run's final text takes to be visible once delivery has read its `run.finished`.

Labels are bounded: platforms are the configured adapters, ops and outcomes closed sets, ledger
states the contracts' `LedgerState`; never a chat or user."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from prometheus_client import CollectorRegistry

from agentstream.contracts import LedgerState
from agentstream.metrics.declare import counter, histogram

CALL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)
VISIBLE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


class CallOp(StrEnum):
    SEND = "send"
    EDIT = "edit"
    DRAFT = "draft"


class CallOutcome(StrEnum):
    """How a platform call ended: `ok`, or the `kind` of the `AdapterError` it raised (`error`: any other failure)."""

    OK = "ok"
    RATE_LIMITED = "rate_limited"
    TOO_LONG = "too_long"
    BAD_FORMAT = "bad_format"
    FORMATTING_REJECTED = "formatting_rejected"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    TRANSIENT = "transient"
    UNKNOWN = "unknown"
    ERROR = "error"


class DeliveryMetrics:
    def __init__(self, registry: CollectorRegistry, platforms: Iterable[str] = ()) -> None:
        self.calls = counter(
            registry,
            "agentstream_delivery_platform_calls_total",
            "Platform API calls, by platform, op (send, edit, draft) and outcome (rate_limited: a 429)",
            "platform",
            "op",
            "outcome",
        )
        self.call_seconds = histogram(
            registry,
            "agentstream_delivery_platform_call_seconds",
            "Platform API call latency (edit: the edit latency a streamed answer sees), by platform and op",
            "platform",
            "op",
            buckets=CALL_BUCKETS,
        )
        self.visible_seconds = histogram(
            registry,
            "agentstream_delivery_visible_seconds",
            "From reading a run's `run.finished` to its final text delivered (the stream closed), by platform",
            "platform",
            buckets=VISIBLE_BUCKETS,
        )
        self.degraded = counter(
            registry,
            "agentstream_delivery_degraded_streams_total",
            "Streams degraded to the final text only after repeated 429s, by platform",
            "platform",
        )
        self.ledger_writes = counter(
            registry,
            "agentstream_delivery_ledger_writes_total",
            "Ledger rows written, by the state they record (unknown: a call that may have landed)",
            "state",
        )
        # Every series a panel or alert divides by exists from the start, at zero.
        for platform in platforms:
            for op in (CallOp.SEND, CallOp.EDIT):
                for outcome in (CallOutcome.OK, CallOutcome.RATE_LIMITED):
                    self.calls.labels(platform, op, outcome)
            self.degraded.labels(platform)
        for state in LedgerState:
            self.ledger_writes.labels(state)

    def call(self, platform: str, op: CallOp, outcome: CallOutcome, seconds: float | None = None) -> None:
        self.calls.labels(platform, op, outcome).inc()
        if seconds is not None:
            self.call_seconds.labels(platform, op).observe(seconds)

    def stream_degraded(self, platform: str) -> None:
        self.degraded.labels(platform).inc()

    def ledger_write(self, state: LedgerState) -> None:
        self.ledger_writes.labels(state).inc()

    def visible(self, platform: str, seconds: float) -> None:
        self.visible_seconds.labels(platform).observe(seconds)
