"""Tracing: off, nothing is installed or imported and records carry no trace header; on, spans
continue a record's trace, records written inside a span carry it, and a kept context parents
work that starts later."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from faststream.kafka.opentelemetry import KafkaTelemetryMiddleware
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from agentstream import tracing
from agentstream.config import TracingSettings, load_settings
from agentstream.contracts import Notice, NoticeLevel
from agentstream.kafka.producer import encode_record
from agentstream.service import Infra, Runtime
from agentstream.tracing import NO_TRACING, tracing_for
from agentstream.tracing_otel import OtelTracing


def _notice() -> Notice:
    return Notice(
        run_id="r-1", root_run_id="r-1", conversation_key="memory:c", seq=0, level=NoticeLevel.INFO, text="hi"
    )


@dataclass
class Record:
    topic: str = "inbound"
    partition: int = 0
    offset: int = 7
    headers: list[tuple[str, bytes]] = field(default_factory=list)


@pytest.fixture
def traced() -> Iterator[tuple[OtelTracing, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    on = OtelTracing(provider)
    yield on, exporter
    on.shutdown()


def _named(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


# -- off ---------------------------------------------------------------------------------
def test_off_by_default_installs_no_provider_and_no_middleware() -> None:
    settings = load_settings()
    assert settings.tracing.enabled is False
    infra = Infra.build(settings, "agent-runner", uses_database=False)
    assert infra.tracing is NO_TRACING
    assert not any(isinstance(m, KafkaTelemetryMiddleware) for m in infra.broker.middlewares)
    assert tracing.context_headers is None
    _, _, headers = encode_record(_notice(), "memory:c")
    assert [name for name, _ in headers] == ["content-type", "type"]


def test_off_spans_do_nothing() -> None:
    off = tracing_for(TracingSettings(), "ingress")
    assert off is NO_TRACING and off.middleware() is None
    with off.span("x") as span, off.consuming(Record(), "y") as inner, off.continuing("k", "z"):
        span.set_attribute("a", 1)
        inner.set_attribute("b", "c")
    off.keep("k")


@pytest.mark.timeout(90)  # a fresh interpreter imports the CLI and every service's library (~10 s on a busy machine)
def test_off_imports_nothing_of_the_sdk_at_start() -> None:
    # A fresh interpreter: the test process itself has imported the SDK for the other tests.
    code = textwrap.dedent(
        """
        import sys
        import agentstream_stack.cli
        from agentstream.config import SERVICES, load_settings
        from agentstream.service import Infra

        for name in SERVICES:
            Infra.build(load_settings(), name, uses_database=name != "agent-runner")
        loaded = sorted(m for m in sys.modules if m.startswith(
            ("opentelemetry.sdk", "opentelemetry.exporter", "faststream.opentelemetry", "agentstream.tracing_otel")
        ))
        print(loaded)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=80, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# -- on ----------------------------------------------------------------------------------
def test_on_the_service_gets_a_provider_and_faststreams_middleware(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(tracing={"enabled": True, "service_name": "acme", "sample_ratio": 0.5})
    infra = Infra.build(settings, "delivery", uses_database=False)
    try:
        assert isinstance(infra.tracing, OtelTracing)
        assert infra.tracing.provider.resource.attributes["service.name"] == "acme-delivery"
        assert "0.5" in infra.tracing.provider.sampler.get_description()
        assert isinstance(infra.broker.middlewares[0], KafkaTelemetryMiddleware)  # outermost
    finally:
        infra.tracing.shutdown()
    assert tracing.context_headers is None  # the last tracing service gone: records plain again


def test_records_written_inside_a_span_carry_its_context(traced: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    on, exporter = traced
    with on.span("work") as span:
        _, _, headers = encode_record(_notice(), "memory:c")
    context = span.get_span_context()  # type: ignore[attr-defined]
    version, trace_id, span_id, flags = dict(headers)["traceparent"].decode().split("-")
    assert (version, trace_id, span_id) == ("00", f"{context.trace_id:032x}", f"{context.span_id:016x}")
    assert int(flags, 16) & 1  # sampled
    _, _, outside = encode_record(_notice(), "memory:c")
    assert "traceparent" not in dict(outside)


def test_a_record_continues_the_trace_its_header_names(traced: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    on, exporter = traced
    with on.span("producer"):
        _, _, headers = encode_record(_notice(), "memory:c")
    with on.span("batch"), on.consuming(Record(headers=headers), "decide"):
        pass
    producer, batch, decide = (_named(exporter, n) for n in ("producer", "batch", "decide"))
    assert decide.context.trace_id == producer.context.trace_id
    assert decide.parent is not None and decide.parent.span_id == producer.context.span_id
    assert decide.kind is SpanKind.CONSUMER
    assert [link.context.span_id for link in decide.links] == [batch.context.span_id]
    assert decide.attributes is not None and decide.attributes["messaging.kafka.message.offset"] == 7


def test_a_record_without_context_starts_a_trace_of_its_own(traced: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    on, exporter = traced
    with on.span("batch"), on.consuming(Record(), "first"), on.consuming(Record(offset=8), "second"):
        pass
    batch, first, second = (_named(exporter, n) for n in ("batch", "first", "second"))
    assert first.parent is None
    assert len({batch.context.trace_id, first.context.trace_id}) == 2
    # Inside another record's span all the same: the record's own (new) trace, linked to it.
    assert second.parent is None and second.context.trace_id != first.context.trace_id
    assert [link.context.span_id for link in second.links] == [first.context.span_id]


def test_kept_context_parents_work_started_later(traced: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    on, exporter = traced
    with on.span("handler"):
        on.keep("run-1")
    with on.span("unrelated"), on.continuing("run-1", "run"):
        pass
    with on.continuing("run-1", "again"):  # taken once: later work is not parented by it
        pass
    handler, run, again = (_named(exporter, n) for n in ("handler", "run", "again"))
    assert run.parent is not None and run.parent.span_id == handler.context.span_id
    assert again.parent is None


def test_kept_contexts_are_bounded(traced: tuple[OtelTracing, InMemorySpanExporter], monkeypatch) -> None:
    on, _ = traced
    monkeypatch.setattr("agentstream.tracing_otel.KEPT_CONTEXTS", 3)
    for i in range(5):
        on.keep(f"run-{i}")
    assert list(on._kept) == ["run-2", "run-3", "run-4"]


@pytest.mark.timeout(30)  # the exporter's own HTTP timeout is 10 s: the stop must not wait for it
async def test_a_collector_that_never_answers_does_not_hold_the_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentstream.service.FINAL_STEP_TIMEOUT_S", 0.5)
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}/v1/traces"
        settings = load_settings(tracing={"enabled": True, "otlp_endpoint": endpoint})

        runtime = Runtime(Infra.build(settings, "bare", uses_database=False))  # a service of no parts of its own
        with runtime.infra.tracing.span("pending"):
            pass
        await runtime.stop()
        # The export the stop started is still waiting for its answer: had the stop waited for the
        # exporter, the exporter would have given up (and closed its connection) first.
        silent.settimeout(10)
        export, _ = silent.accept()
        with export:
            assert export_still_waiting(export)


def export_still_waiting(connection: socket.socket) -> bool:
    """The client sent its request and is waiting for the answer, its connection still open."""
    connection.settimeout(1.0)
    received = b""
    try:
        while chunk := connection.recv(65536):
            received += chunk
    except TimeoutError:
        return received.startswith(b"POST ")
    return False  # closed by the client
