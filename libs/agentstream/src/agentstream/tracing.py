"""Tracing: one OpenTelemetry trace per run, across the services, off by default.

A service holds a `Tracing` (`Infra.tracing`). While `tracing.enabled` is false it is
`NO_TRACING`, whose methods do nothing: nothing of the OpenTelemetry SDK, its exporter or
FastStream's telemetry middleware is imported, and records carry no trace header. Enabled,
`tracing_for` builds `agentstream.tracing_otel.OtelTracing` (imported only then).

Context crosses Kafka as the W3C `traceparent` header. On consume, FastStream's telemetry
middleware reads it and makes the handler's `<topic> process` span current; on produce,
`encode_record` writes the current context (every service writes records through the broker's
aiokafka producer, past FastStream's publishers, see kafka/producer.py). Work a handler hands
to a task started later (the runner's runs) takes its parent with `keep` / `continuing`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from agentstream.config import TracingSettings

AttributeValue = str | bool | int | float
Attributes = Mapping[str, AttributeValue]


class SpanLike(Protocol):
    """What code that opened a span may do with it (an OpenTelemetry `Span` is one)."""

    def set_attribute(self, key: str, value: AttributeValue) -> None: ...


class ConsumerRecordLike(Protocol):
    """An aiokafka `ConsumerRecord` as far as tracing reads it."""

    topic: str
    partition: int
    offset: int
    headers: Sequence[tuple[str, bytes]]


class _NoSpan:
    def set_attribute(self, key: str, value: AttributeValue) -> None:
        return None


_UNTRACED: AbstractContextManager[SpanLike] = nullcontext(_NoSpan())  # reusable: nullcontext holds no state


class Tracing:
    """A service's tracing while it is off: every method does nothing, and hands back one shared
    context manager, so an untraced hot path (ingress's batches) pays a method call per record."""

    enabled: bool = False

    def middleware(self) -> Any | None:
        """The broker middleware that continues a record's trace in its handler; None: none."""
        return None

    def span(
        self, name: str, attributes: Attributes | None = None, *, client: bool = False
    ) -> AbstractContextManager[SpanLike]:
        """A child of the current span, current itself inside the block. `client`: a call out
        of the process (a model, a tool), else internal work."""
        return _UNTRACED

    def consuming(self, record: ConsumerRecordLike, name: str) -> AbstractContextManager[SpanLike]:
        """A span for one record of a batch: it continues the record's own trace (a new one when
        the record carries none), linked to the batch's span."""
        return _UNTRACED

    def keep(self, key: str) -> None:
        """Remember the current context for the work `key` that a later task carries out."""

    def continuing(self, key: str, name: str, attributes: Attributes | None = None) -> AbstractContextManager[SpanLike]:
        """`span`, under the context `keep(key)` remembered (else the current one)."""
        return _UNTRACED

    def shutdown(self) -> None:
        """Export what is still buffered and stop exporting."""


NO_TRACING = Tracing()

# Set while any service of the process traces: the headers that carry the current context.
# `encode_record` reads it on every record, so off it is one global lookup.
context_headers: Callable[[], list[tuple[str, bytes]]] | None = None


def tracing_for(settings: TracingSettings, service: str) -> Tracing:
    """The service's tracing: `NO_TRACING` unless `tracing.enabled`."""
    if not settings.enabled:
        return NO_TRACING
    from agentstream.tracing_otel import OtelTracing  # the SDK only when tracing is on

    return OtelTracing.from_settings(settings, service)
