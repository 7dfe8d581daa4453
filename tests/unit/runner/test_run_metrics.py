"""The runner's metrics read off the events of a run: starts, endings, durations, first token,
model calls and tokens, tool results and retries — labelled by connector, never by run."""

from typing import get_args

import pytest
from prometheus_client import CollectorRegistry

from agentstream.config import load_settings
from agentstream.contracts import (
    AnyRunEvent,
    Arrival,
    ChatMessage,
    EventBase,
    MessageDelta,
    ReplyTarget,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepFailed,
    StepStarted,
    ToolCall,
    ToolCatalogEntry,
    ToolKind,
    ToolResult,
)
from agentstream.contracts.endings import FinishReason, RunStatus
from agentstream.contracts.events import StepType
from agentstream_runner.connectors.base import LLMRequest, TextDelta
from agentstream_runner.connectors.resolve import Connectors
from agentstream_runner.run_metrics import ArrivalHop, RunMetrics, arrival_hops
from agentstream_runner.tool_catalog import ToolCatalog
from agentstream_testing.fake_openai import FakeOpenAI


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


IDS = {"run_id": "r1", "root_run_id": "r1", "conversation_key": "web:c", "seq": 1}


def _metrics() -> tuple[RunMetrics, CollectorRegistry, Clock]:
    registry, clock = CollectorRegistry(), Clock()
    return RunMetrics(registry, {"main": "gpt-x", "other": None}, clock=clock), registry, clock


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_run_is_counted_timed_and_its_tokens_summed() -> None:
    metrics, registry, clock = _metrics()
    target = ReplyTarget(platform="web", chat_id="c")
    metrics.observe(RunStarted(**IDS, assistant_id="a", connector_id="main", reply_target=target))
    assert _value(registry, "agentstream_runner_active_runs") == 1
    metrics.observe(StepStarted(**IDS, step_id="s1", step_type=StepType.LLM, input={"connector": "main"}))
    clock.now += 0.3
    metrics.observe(MessageDelta(**IDS, message_id="m", text="he"))
    clock.now += 0.5
    metrics.observe(MessageDelta(**IDS, message_id="m", text="llo"))
    usage = {"prompt_tokens": 12, "completion_tokens": 2, "llm_calls": 1}
    metrics.observe(StepCompleted(**IDS, step_id="s1", step_type=StepType.LLM, output={"usage": usage}))
    metrics.observe(ToolCall(**IDS, call_id="c1", tool="calculator", arguments="{}", attempt=2))
    metrics.observe(ToolResult(**IDS, call_id="c1", tool="calculator", ok=False, error="boom"))
    metrics.observe(StepStarted(**IDS, step_id="s2", step_type=StepType.LLM, input={"connector": "main"}))
    metrics.observe(StepFailed(**IDS, step_id="s2", step_type=StepType.LLM, error="503"))
    clock.now += 1.2
    metrics.observe(RunFinished(**IDS, status=RunStatus.FAILED, reason=FinishReason.ERROR))

    assert _value(registry, "agentstream_runs_started_total", connector="main") == 1
    assert _value(registry, "agentstream_runs_finished_total", status="failed", reason="error") == 1
    assert _value(registry, "agentstream_run_duration_seconds_sum", connector="main") == pytest.approx(2.0)
    assert _value(registry, "agentstream_run_first_token_seconds_sum", connector="main") == pytest.approx(0.3)
    assert _value(registry, "agentstream_run_first_token_seconds_count", connector="main") == 1
    ok = {"connector": "main", "model": "gpt-x"}
    assert _value(registry, "agentstream_llm_calls_total", **ok, outcome="ok") == 1
    assert _value(registry, "agentstream_llm_calls_total", **ok, outcome="error") == 1
    assert _value(registry, "agentstream_llm_tokens_total", **ok, kind="prompt") == 12
    assert _value(registry, "agentstream_llm_tokens_total", **ok, kind="completion") == 2
    assert _value(registry, "agentstream_runner_tool_calls_total", tool="calculator", outcome="error") == 1
    assert _value(registry, "agentstream_runner_tool_retries_total", tool="calculator") == 1
    assert _value(registry, "agentstream_runner_events_total", type="message.delta") == 2
    assert _value(registry, "agentstream_runner_active_runs") == 0


def test_a_delegated_run_ending_is_not_a_root_run_ending() -> None:
    metrics, registry, _ = _metrics()
    child = {**IDS, "run_id": "c1", "parent_run_id": "r1", "depth": 1}
    metrics.observe(RunFinished(**child, status=RunStatus.COMPLETED))
    assert _value(registry, "agentstream_runs_finished_total", status="completed", reason="none") == 0


def test_series_of_every_configured_connector_exist_at_zero() -> None:
    _, registry, _ = _metrics()
    for connector, model in (("main", "gpt-x"), ("other", "default")):
        for outcome in ("ok", "error"):
            labels = {"connector": connector, "model": model, "outcome": outcome}
            assert _value(registry, "agentstream_llm_calls_total", **labels) == 0
    assert _value(registry, "agentstream_runs_finished_total", status="completed", reason="none") == 0


async def test_a_model_request_sent_again_is_counted_per_connector() -> None:
    registry = CollectorRegistry()
    async with FakeOpenAI() as fake:
        settings = load_settings(
            connectors=[
                {"id": "gpt", "type": "openai", "base_url": fake.base_url, "model": "m", "retry_base_delay_s": 0.01}
            ]
        )
        metrics = RunMetrics(registry, {c.id: c.model for c in settings.connectors})
        connectors = Connectors(settings, on_retry=metrics.llm_retry)
        fake.add_turn(mode="503")
        fake.add_turn(text="finally")
        try:
            connector = connectors.open(settings.connectors[0])
            request = LLMRequest(messages=(ChatMessage(role="user", content="hi"),))
            chunks = [chunk async for chunk in connector.stream(request)]
        finally:
            await connectors.close()
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "finally"
    assert _value(registry, "agentstream_llm_retries_total", connector="gpt", model="m") == 1


def _tool_samples(registry: CollectorRegistry) -> set[str]:
    names = ("agentstream_runner_tool_calls_total", "agentstream_runner_tool_retries_total")
    return {
        sample.labels["tool"]
        for family in registry.collect()
        for sample in family.samples
        if sample.name in names and "tool" in sample.labels
    }


def test_a_tool_name_the_runner_does_not_know_is_labelled_unknown() -> None:
    catalog = ToolCatalog()
    served = ToolCatalogEntry(
        tool="docs__search", kind=ToolKind.MCP, source="docs", executor_id="ex1", available=True, heartbeat_s=30
    )
    catalog.apply(served)
    registry = CollectorRegistry()
    metrics = RunMetrics(registry, {"main": None}, tools=catalog)
    for tool in ("calculator", "shell", "docs__search", "made up by the model", "docs__other"):
        metrics.observe(ToolCall(**IDS, call_id=tool, tool=tool, arguments="{}", attempt=2))
        metrics.observe(ToolResult(**IDS, call_id=tool, tool=tool, ok=True))
    assert _tool_samples(registry) == {"calculator", "shell", "docs__search", "unknown"}
    assert _value(registry, "agentstream_runner_tool_calls_total", tool="unknown", outcome="ok") == 2
    assert _value(registry, "agentstream_runner_tool_retries_total", tool="unknown") == 2


def test_without_a_catalogue_only_the_tools_every_runner_knows_are_labelled() -> None:
    metrics, registry, _ = _metrics()
    metrics.observe(ToolResult(**IDS, call_id="c1", tool="docs__search", ok=True))
    metrics.observe(ToolResult(**IDS, call_id="c2", tool="clock", ok=True))
    assert _tool_samples(registry) == {"unknown", "clock"}


def test_every_event_class_is_a_member_of_the_union_the_metrics_match_over() -> None:
    def leaves(cls: type) -> set[type]:
        return {cls} | {leaf for sub in cls.__subclasses__() for leaf in leaves(sub)}

    concrete = {c for c in leaves(EventBase) if c is not EventBase}
    assert concrete == set(get_args(AnyRunEvent))


def test_the_time_from_a_message_to_its_model_request_is_observed_per_hop_once() -> None:
    registry = CollectorRegistry()
    wall = Clock()
    metrics = RunMetrics(registry, {"main": "gpt-x"}, clock=Clock(), wall_clock=wall)
    arrival = Arrival(produced_at=100.0, ingress_read_at=100.004, runs_produced_at=100.006, runner_read_at=100.016)
    target = ReplyTarget(platform="web", chat_id="c")
    metrics.observe(RunStarted(**IDS, assistant_id="a", connector_id="main", reply_target=target, arrival=arrival))
    wall.now = 100.021
    for step in ("s1", "s2"):  # the second model call of the run is no arrival
        metrics.observe(StepStarted(**IDS, step_id=step, step_type=StepType.LLM, input={"connector": "main"}))
        wall.now += 5.0
    total = _value(registry, "agentstream_run_time_to_model_request_seconds_sum", connector="main")
    assert total == pytest.approx(0.021)
    assert _value(registry, "agentstream_run_time_to_model_request_seconds_count", connector="main") == 1
    hops = {
        hop: _value(registry, "agentstream_run_arrival_hop_seconds_sum", hop=hop)
        for hop in ("inbound_to_ingress", "ingress_to_runs", "runs_to_runner", "runner_to_model_request")
    }
    assert hops == pytest.approx(
        {
            "inbound_to_ingress": 0.004,
            "ingress_to_runs": 0.002,
            "runs_to_runner": 0.010,
            "runner_to_model_request": 0.005,
        }
    )


def test_a_hop_with_an_unknown_end_is_left_out() -> None:
    hops = arrival_hops(Arrival(produced_at=None, ingress_read_at=1.0, runs_produced_at=None, runner_read_at=3.0), 3.5)
    assert hops == {ArrivalHop.RUNNER_TO_MODEL_REQUEST: pytest.approx(0.5)}


def test_a_run_without_an_arrival_observes_no_time_to_model_request() -> None:
    metrics, registry, _ = _metrics()
    target = ReplyTarget(platform="web", chat_id="c")
    metrics.observe(RunStarted(**IDS, assistant_id="a", connector_id="main", reply_target=target))
    metrics.observe(StepStarted(**IDS, step_id="s1", step_type=StepType.LLM, input={"connector": "main"}))
    assert not _value(registry, "agentstream_run_time_to_model_request_seconds_count", connector="main")
