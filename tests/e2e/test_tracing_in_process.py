"""Tracing on, the embedded stack in one process on the real broker: one message's run is one
trace, its spans linked parent to child from ingress through the runner (model and tool calls)
and the tool executor to delivery and persistence, and the same spans reach an OTLP collector."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentstream.contracts import RunFinished
from agentstream.kafka.flavor import resolve_flavor
from agentstream.tracing_otel import export_also_to, stop_exporting_to
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_stack.run_follower import RunFollower, send_and_follow
from agentstream_testing.fake_otlp import FakeCollector
from tests.e2e.conftest import DEMO_ANSWER, inbound, poll_json


def _service(span: ReadableSpan) -> str:
    return str(span.resource.attributes["service.name"]).removeprefix("agentstream-")


def _lineage(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    """The span and its ancestors, nearest first; fails on a parent missing from the trace."""
    chain = [span]
    while chain[-1].parent is not None:
        chain.append(by_id[chain[-1].parent.span_id])
    return chain


def _run_span(exporter: InMemorySpanExporter, run_id: str) -> ReadableSpan:
    (run,) = [
        s for s in exporter.get_finished_spans() if s.name == "run" and s.attributes["agentstream.run_id"] == run_id
    ]
    return run


async def _wait_for_span(exporter: InMemorySpanExporter, name: str, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not any(s.name == name for s in exporter.get_finished_spans()):  # noqa: ASYNC110 - the SDK's exporter has no event to wait on
            await asyncio.sleep(0.05)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    export_also_to(exporter)
    yield exporter
    stop_exporting_to(exporter)


async def test_one_run_is_one_trace_from_ingress_to_delivery(settings_factory, spans: InMemorySpanExporter):
    with FakeCollector() as collector:
        settings = settings_factory(tracing={"enabled": True, "otlp_endpoint": collector.endpoint})
        async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
            msg = inbound()  # the demo model calls the calculator, then answers
            events = await send_and_follow(stack.settings.kafka, msg, timeout=60)
            finished = events[-1]
            assert isinstance(finished, RunFinished) and finished.status == "completed"
            await poll_json(
                f"{stack.urls['delivery']}/v1/memory/chats/{msg.chat_id}",
                lambda j: any(m["text"] == DEMO_ANSWER for m in j["messages"]),
            )
            await _wait_for_span(spans, "deliver final")
            await _wait_for_span(spans, "persist run")
        # Stopped: each service exported what it still buffered to the collector.

        run = _run_span(spans, finished.run_id)
        trace_id = run.context.trace_id
        trace = [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]
        by_id = {s.context.span_id: s for s in trace}
        named = {}
        for s in trace:
            named.setdefault(s.name, []).append(s)

        # One root: the message's decision in ingress; everything else descends from it.
        roots = [s for s in trace if s.parent is None]
        assert [(r.name, _service(r)) for r in roots] == [("inbound decide", "ingress")]
        for span in trace:
            assert _lineage(span, by_id)[-1] is roots[0]

        # ingress → runner: the run continues the `runs` record ingress wrote.
        assert [_service(s) for s in _lineage(run, by_id)] == ["agent-runner", "agent-runner", "ingress"]

        # The model calls (two: one asks for the tool, one answers) and the tool call, inside the run.
        llm = [s for s in trace if s.name.startswith("chat ")]
        assert len(llm) == 2 and all(run in _lineage(s, by_id) for s in llm)
        assert finished.usage.prompt_tokens > 0 and finished.usage.completion_tokens > 0
        assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in llm) == finished.usage.prompt_tokens
        assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in llm) == finished.usage.completion_tokens
        (tool_call,) = named["execute_tool calculator"]
        assert run in _lineage(tool_call, by_id) and tool_call.attributes["agentstream.tool.ok"] is True

        # runner → tool executor: the executor's work is a child of the runner's tool call.
        (executed,) = named["tool calculator"]
        executed_lineage = _lineage(executed, by_id)
        assert _service(executed) == "tool-executor" and tool_call in executed_lineage
        assert {"ingress", "agent-runner", "tool-executor"} <= {_service(s) for s in executed_lineage}

        # runner → delivery, and → persistence: the final text's delivery and the run's write.
        for name, service in (("deliver final", "delivery"), ("persist run", "persistence")):
            (span,) = named[name]
            assert _service(span) == service and run in _lineage(span, by_id), name

        # The same spans went out over OTLP (the exporter configured by `tracing.otlp_endpoint`).
        received = collector.received(f"{trace_id:032x}")
        assert {s.span_id for s in received} == {f"{s.context.span_id:016x}" for s in trace}
        assert {s.service for s in received} == {
            f"agentstream-{name}" for name in ("ingress", "agent-runner", "tool-executor", "delivery", "persistence")
        }


async def test_a_run_waiting_its_turn_is_a_trace_of_its_own(settings_factory, spans: InMemorySpanExporter):
    """The second message of a chat waits for the first run (it starts when that one ends, not in
    the handler of its record): its run still continues its own message's trace."""
    with FakeCollector() as collector:
        settings = settings_factory(tracing={"enabled": True, "otlp_endpoint": collector.endpoint})
        async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
            first = inbound()
            second = inbound(chat=first.chat_id)
            kafka = await resolve_flavor(stack.settings.kafka)
            async with RunFollower(kafka) as follow_first, RunFollower(kafka) as follow_second:
                await follow_first.send(first)
                await follow_second.send(second)

                async def finished_of(follower: RunFollower, message) -> RunFinished:
                    events = [e async for e in follower.follow(message)]
                    assert isinstance(events[-1], RunFinished) and events[-1].status == "completed"
                    return events[-1]

                async with asyncio.timeout(60):
                    done = await asyncio.gather(finished_of(follow_first, first), finished_of(follow_second, second))

    by_id = {s.context.span_id: s for s in spans.get_finished_spans()}
    runs = [_run_span(spans, finished.run_id) for finished in done]
    assert runs[0].context.trace_id != runs[1].context.trace_id
    for run in runs:
        lineage = _lineage(run, by_id)
        assert [(s.name, _service(s)) for s in lineage[1:]][-1] == ("inbound decide", "ingress")
        assert not any(s.name == "run" for s in lineage[1:])  # not under the run it waited for
