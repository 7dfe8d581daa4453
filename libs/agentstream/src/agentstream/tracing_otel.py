"""Tracing while it is on: an OpenTelemetry SDK tracer provider per service, exporting over OTLP.

Imported only by `agentstream.tracing.tracing_for` when `tracing.enabled` is true. Each service
gets its own provider (its own `service.name`), not the process-global one: the embedded stack
runs the five services in one process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from faststream.kafka.opentelemetry import KafkaTelemetryMiddleware
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentstream import tracing
from agentstream.config import TracingSettings
from agentstream.tracing import Attributes, ConsumerRecordLike, SpanLike, Tracing

# Contexts kept for work not started yet (runs waiting their conversation's turn), at most this
# many: a run that never starts (dismissed, ignored resume) must not hold its entry forever.
KEPT_CONTEXTS = 10_000

_PROPAGATOR = TraceContextTextMapPropagator()

# Exporters every provider built afterwards in this process also sends to, synchronously (tests).
_extra_exporters: list[SpanExporter] = []
_extra_lock = threading.Lock()

_live = 0  # services tracing in this process: records carry the context while any does


def export_also_to(exporter: SpanExporter) -> None:
    """Send the spans of every service that starts tracing from now on to `exporter` too."""
    with _extra_lock:
        _extra_exporters.append(exporter)


def stop_exporting_to(exporter: SpanExporter) -> None:
    with _extra_lock:
        if exporter in _extra_exporters:
            _extra_exporters.remove(exporter)


def _context_headers() -> list[tuple[str, bytes]]:
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return [(name, value.encode()) for name, value in carrier.items()]


class OtelTracing(Tracing):
    enabled = True

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("agentstream")
        self._kept: OrderedDict[str, Context] = OrderedDict()
        self._live = True
        global _live
        _live += 1
        tracing.context_headers = _context_headers

    @classmethod
    def from_settings(cls, settings: TracingSettings, service: str) -> OtelTracing:
        provider = TracerProvider(
            resource=Resource.create({"service.name": f"{settings.service_name}-{service}"}),
            sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
        )
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otlp_endpoint)))
        with _extra_lock:
            for exporter in _extra_exporters:
                provider.add_span_processor(SimpleSpanProcessor(exporter))
        return cls(provider)

    def middleware(self) -> Any:
        # Spans only: the services' metrics are Prometheus (`/metrics`), not OpenTelemetry's.
        return KafkaTelemetryMiddleware(tracer_provider=self.provider, meter_provider=NoOpMeterProvider())

    @contextmanager
    def span(self, name: str, attributes: Attributes | None = None, *, client: bool = False) -> Iterator[SpanLike]:
        kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
        with self.tracer.start_as_current_span(name, kind=kind, attributes=attributes) as span:
            yield span

    @contextmanager
    def consuming(self, record: ConsumerRecordLike, name: str) -> Iterator[SpanLike]:
        carrier = {key: value.decode("latin-1") for key, value in record.headers or ()}
        batch = trace.get_current_span().get_span_context()
        with self.tracer.start_as_current_span(
            name,
            context=_PROPAGATOR.extract(carrier),  # empty without a traceparent: a new trace
            kind=SpanKind.CONSUMER,
            links=[Link(batch)] if batch.is_valid else None,
            attributes={
                "messaging.system": "kafka",
                "messaging.destination.name": record.topic,
                "messaging.kafka.destination.partition": record.partition,
                "messaging.kafka.message.offset": record.offset,
            },
        ) as span:
            yield span

    def keep(self, key: str) -> None:
        self._kept[key] = otel_context.get_current()
        self._kept.move_to_end(key)
        while len(self._kept) > KEPT_CONTEXTS:
            self._kept.popitem(last=False)

    @contextmanager
    def continuing(self, key: str, name: str, attributes: Attributes | None = None) -> Iterator[SpanLike]:
        parent = self._kept.pop(key, None)
        with self.tracer.start_as_current_span(name, context=parent, attributes=attributes) as span:
            yield span

    def shutdown(self) -> None:
        global _live
        if self._live:
            self._live = False
            _live -= 1
            if _live == 0:
                tracing.context_headers = None
        self.provider.shutdown()
