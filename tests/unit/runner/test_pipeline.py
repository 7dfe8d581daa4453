"""The run pipeline against fake ports: no Kafka, real scripted connector."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import pytest

from agentstream.config import ConnectorSettings, Settings, load_settings
from agentstream.contracts import (
    EventBase,
    MessageCompleted,
    MessageDelta,
    Notice,
    ReplyTarget,
    RunFinished,
    RunOptions,
    RunStarted,
    StartRun,
    StepCompleted,
    ToolCall,
    ToolCallRequest,
    ToolCallResult,
    ToolResult,
    Usage,
    User,
)
from agentstream_runner.assistants import Assistants
from agentstream_runner.connectors.base import LLMRequest, TextDelta, ToolCallChunk, UsageChunk
from agentstream_runner.connectors.resolve import DEFAULT_FACTORIES, Connectors
from agentstream_runner.context import RunContext, RunControl
from agentstream_runner.pipeline import run_pipeline
from agentstream_tools.executor import answer

GREETING = "Hello! I am the agentstream demo assistant. You said: "
ToolFn = Callable[[ToolCallRequest], Awaitable[ToolCallResult]]


async def forty_two(request: ToolCallRequest) -> ToolCallResult:
    return answer(request, ok=True, content="42")  # as the tool executor answers


async def never(request: ToolCallRequest) -> ToolCallResult:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


class FakePorts:
    def __init__(self, tool: ToolFn = forty_two) -> None:
        self.events: list[EventBase] = []
        self.requests: list[ToolCallRequest] = []
        self._tool = tool
        self._changed = asyncio.Condition()

    async def publish_event(self, event: EventBase) -> None:
        self.events.append(event)
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, kind: str, timeout: float = 2.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: kind in self.types)

    async def call_tool(self, request: ToolCallRequest) -> ToolCallResult:
        self.requests.append(request)
        return await self._tool(request)

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def make_settings(**overrides: Any) -> Settings:
    overrides.setdefault("connectors", [{"id": "demo", "type": "scripted", "token_delay_ms": 0}])
    return load_settings(**overrides)


def make_ctx(
    ports: FakePorts, settings: Settings | None = None, factories=DEFAULT_FACTORIES, control: RunControl | None = None
) -> RunContext:
    settings = settings or make_settings()
    return RunContext(
        ports=ports,
        connectors=Connectors(settings, factories),
        assistants=Assistants(settings),
        runner=settings.runner,
        control=control or RunControl(),
    )


def start_run(text: str, user: User | None = User(id="u1", name="Ann")) -> StartRun:
    return StartRun(
        run_id="run-1",
        conversation_key="web:c1",
        assistant_id="default",
        user=user,
        text=text,
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
    )


def assert_one_well_formed_stream(ports: FakePorts) -> RunFinished:
    seqs = [e.seq for e in ports.events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert all(e.run_id == e.root_run_id == "run-1" and e.conversation_key == "web:c1" for e in ports.events)
    finished = ports.of(RunFinished)
    assert len(finished) == 1 and ports.events[-1] is finished[0]
    return finished[0]


async def test_simple_answer():
    ports = FakePorts()
    await run_pipeline(make_ctx(ports), start_run("hi there"))

    assert ports.types[:3] == ["run.started", "step.started", "message.started"]
    assert ports.types[-3:] == ["message.completed", "step.completed", "run.finished"]
    assert set(ports.types[3:-3]) == {"message.delta"}
    started = ports.of(RunStarted)[0]
    assert (started.assistant_id, started.connector_id, started.user_id) == ("default", "demo", "u1")
    assert started.tenant_id is None
    assert [(m.role, m.content) for m in started.input] == [("user", "hi there")]
    text = GREETING + "hi there"
    assert "".join(d.text for d in ports.of(MessageDelta)) == text
    assert ports.of(MessageCompleted)[0].text == text
    finished = assert_one_well_formed_stream(ports)
    assert (finished.status, finished.text, finished.error) == ("completed", text, None)
    assert finished.usage.llm_calls == 1 and finished.usage.completion_tokens == len(text.split())
    assert ports.requests == []


async def test_tool_round_trip():
    ports = FakePorts()
    await run_pipeline(make_ctx(ports), start_run("calculate 6*7"))

    [request] = ports.requests
    assert (request.tool, json.loads(request.arguments), request.attempt) == ("calculator", {"expression": "6*7"}, 1)
    assert request.run_id == request.root_run_id == "run-1" and request.deadline is not None
    assert ports.types == [
        "run.started",
        "step.started",
        "step.completed",  # llm turn 1: only the tool call, no text
        "step.started",
        "tool.call",
        "tool.result",
        "step.completed",  # the tool round
        "segment.break",
        "step.started",
        "message.started",
        *["message.delta"] * len(ports.of(MessageDelta)),
        "message.completed",
        "step.completed",  # llm turn 2: the answer
        "run.finished",
    ]
    call, result = ports.of(ToolCall)[0], ports.of(ToolResult)[0]
    assert call.call_id == result.call_id == request.call_id and (result.ok, result.content) == (True, "42")
    tool_step = [s for s in ports.of(StepCompleted) if s.step_type == "tool"][0]
    assert [m.role for m in tool_step.memory] == ["system", "user", "assistant", "tool"]
    assert tool_step.memory[2].tool_calls[0].name == "calculator" and tool_step.memory[3].content == "42"
    finished = assert_one_well_formed_stream(ports)
    assert (finished.status, finished.text) == ("completed", "6*7 = 42")
    assert finished.usage.llm_calls == 2
    assert finished.usage.completion_tokens == 3  # "6*7", " =", " 42"


@pytest.mark.parametrize("user", [None, User(id="   ")])
async def test_permission_refusal_is_only_a_notice(user):
    ports = FakePorts()
    await run_pipeline(make_ctx(ports), start_run("calculate 6*7", user=user))
    [notice] = ports.events
    assert isinstance(notice, Notice) and notice.text == "not authorized" and notice.seq == 1
    assert notice.reply_target == ReplyTarget(platform="web", chat_id="c1")
    assert ports.requests == []


async def test_connector_not_specified():
    ports = FakePorts()
    await run_pipeline(make_ctx(ports, make_settings(connectors=[])), start_run("hi"))
    finished = assert_one_well_formed_stream(ports)
    assert ports.types == ["run.finished"]
    assert (finished.status, finished.error) == ("failed", "connector not specified")


async def test_unavailable_connector_type_fails_the_run():
    ports = FakePorts()
    settings = make_settings(connectors=[{"id": "gpt", "type": "openai"}])
    await run_pipeline(make_ctx(ports, settings, factories={}), start_run("hi"))
    finished = assert_one_well_formed_stream(ports)
    assert finished.status == "failed" and "connector type openai not available" in finished.error


class BrokenConnector:
    id = "broken"
    capabilities = frozenset({"tools"})

    def __init__(self, config: ConnectorSettings) -> None:
        pass

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Any, None]:
        yield TextDelta("Hel")
        raise RuntimeError("boom")


async def test_unexpected_exception_is_recorded_then_reraised():
    ports = FakePorts()
    with pytest.raises(RuntimeError, match="boom"):
        await run_pipeline(make_ctx(ports, factories={"scripted": BrokenConnector}), start_run("hi"))
    finished = assert_one_well_formed_stream(ports)
    assert finished.status == "failed" and finished.error.startswith("internal error: RuntimeError: ")
    assert "boom" in finished.error and ports.types[-2] == "step.failed"
    assert "".join(d.text for d in ports.of(MessageDelta)) == "Hel"  # the first text went out at once


class ToolHappyConnector:
    """A model that never stops calling tools."""

    id = "loop"
    capabilities = frozenset({"tools"})

    def __init__(self, config: ConnectorSettings) -> None:
        self.calls = 0

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Any, None]:
        self.calls += 1
        yield ToolCallChunk(call_id=f"c{self.calls}", name="clock", arguments="{}")
        yield UsageChunk(Usage(prompt_tokens=1, completion_tokens=1, llm_calls=1))


async def test_tool_loop_stops_after_max_turns_then_the_standard_response():
    ports = FakePorts()
    await run_pipeline(make_ctx(ports, factories={"scripted": ToolHappyConnector}), start_run("time"))
    finished = assert_one_well_formed_stream(ports)
    # 5 loop turns (each with its tool round), no fallback configured: one more call offered no tools.
    assert finished.status == "completed"
    assert finished.usage.llm_calls == 6 and len(ports.requests) == 5


@pytest.mark.parametrize(("text", "wait_for"), [("calculate 6*7", "tool.call"), ("hi there", "message.delta")])
async def test_interrupt_ends_the_run_interrupted(text, wait_for):
    ports = FakePorts(tool=never)
    control = RunControl()
    settings = make_settings(connectors=[{"id": "demo", "type": "scripted", "token_delay_ms": 100}])
    task = asyncio.create_task(run_pipeline(make_ctx(ports, settings, control=control), start_run(text)))
    await ports.wait_for(wait_for)

    control.stop_reason = "user"
    task.cancel()
    async with asyncio.timeout(0.5):
        await task  # not re-raised: an interrupt is a normal ending
    assert not task.cancelled()
    finished = assert_one_well_formed_stream(ports)
    assert (finished.status, finished.reason) == ("interrupted", "user")


async def test_tool_timeout_becomes_a_failed_result_and_heartbeats_flow():
    ports = FakePorts(tool=never)
    # 20 heartbeat intervals in the wait: two of them come even on a loaded machine (4 did not, once).
    settings = make_settings(runner={"tool_timeout_s": 1.0, "heartbeat_s": 0.05})
    await run_pipeline(make_ctx(ports, settings), start_run("calculate 6*7"))
    [result] = ports.of(ToolResult)
    assert (result.ok, result.error, result.retryable) == (False, "tool timed out", False)
    # The run heartbeats all along (a slow step must not look lost); at least while the tool is awaited.
    waiting = ports.types[ports.types.index("tool.call") : ports.types.index("tool.result")]
    assert waiting.count("run.heartbeat") >= 2
    finished = assert_one_well_formed_stream(ports)
    assert (finished.status, finished.text) == ("completed", "6*7 = error: tool timed out")


async def test_run_started_carries_the_tenant_for_billing():
    ports = FakePorts()
    await run_pipeline(make_ctx(ports), start_run("hi", user=User(id="u1", tenant_id="acme")))
    assert ports.of(RunStarted)[0].tenant_id == "acme"


async def test_skip_history_is_announced_so_the_run_is_not_stored():
    ports = FakePorts()
    start = start_run("hi").model_copy(update={"options": RunOptions(skip=["history"])})
    await run_pipeline(make_ctx(ports), start)
    assert ports.of(RunStarted)[0].store_history is False
    ports = FakePorts()
    await run_pipeline(make_ctx(ports), start_run("hi"))
    assert ports.of(RunStarted)[0].store_history is True


async def test_a_resumed_run_continues_its_memory_its_sequence_and_its_usage():
    from agentstream.contracts import ChatMessage, Usage
    from agentstream_runner.pipeline import ResumePoint

    ports = FakePorts()
    resume = ResumePoint(
        memory=[ChatMessage(role="user", content="resumed question")],
        usage=Usage(prompt_tokens=100, completion_tokens=7, llm_calls=2),
        first_seq=40,
    )
    await run_pipeline(make_ctx(ports), start_run("ignored on resume"), resume)
    assert ports.events[0].seq == 40 and [e.seq for e in ports.events] == list(range(40, 40 + len(ports.events)))
    assert {(e.run_id, e.conversation_key) for e in ports.events} == {("run-1", "web:c1")}
    assert ports.of(RunStarted)[0].input == []  # nothing new: the memory carries the question
    text = GREETING + "resumed question"
    finished = ports.of(RunFinished)[0]
    assert (finished.status, finished.text) == ("completed", text)
    assert (finished.usage.llm_calls, finished.usage.prompt_tokens >= 100) == (3, True)


async def test_the_permission_notice_is_an_error():
    ports = FakePorts()
    await run_pipeline(make_ctx(ports), start_run("hi", user=None))
    [notice] = ports.events
    assert notice.level == "error"  # type: ignore[attr-defined]


async def test_the_users_role_override_picks_the_connector_of_the_run():
    from dataclasses import replace

    from tests.unit.runner.runner_harness import FakeRoles

    settings = make_settings(
        connectors=[
            {"id": "demo", "type": "scripted", "token_delay_ms": 0},
            {"id": "mine", "type": "scripted", "token_delay_ms": 0},
        ],
        roles={"default": "demo"},
    )
    ports = FakePorts()
    ctx = replace(make_ctx(ports, settings), roles=FakeRoles(user={"default": "mine"}))
    await run_pipeline(ctx, start_run("hi"))
    assert ports.of(RunStarted)[0].connector_id == "mine"


async def test_every_event_of_a_run_carries_the_owners_epoch_fresh_or_resumed():
    from agentstream.contracts import ChatMessage
    from agentstream_runner.pipeline import ResumePoint

    fresh, resumed = FakePorts(), FakePorts()
    await run_pipeline(replace_epoch(make_ctx(fresh), 7), start_run("hi"))
    resume = ResumePoint(memory=[ChatMessage(role="user", content="q")], first_seq=40)
    await run_pipeline(replace_epoch(make_ctx(resumed), 7), start_run("hi"), resume)
    assert {e.epoch for e in fresh.events} == {7} and {e.epoch for e in resumed.events} == {7}


def replace_epoch(ctx: RunContext, epoch: int) -> RunContext:
    from dataclasses import replace

    return replace(ctx, epoch=epoch)


async def test_the_run_started_event_names_the_session_of_the_run():
    ports = FakePorts()
    await run_pipeline(make_ctx(ports), start_run("hi").model_copy(update={"session_id": "s-9"}))
    assert ports.of(RunStarted)[0].session_id == "s-9"


TWO_CONNECTORS = [
    {"id": "demo", "type": "scripted", "token_delay_ms": 0},
    {"id": "other", "type": "scripted", "token_delay_ms": 0},
]


async def test_the_callers_connector_answers_the_run():
    ports = FakePorts()
    begun = start_run("hi").model_copy(update={"options": RunOptions(connector="other")})
    await run_pipeline(make_ctx(ports, make_settings(connectors=TWO_CONNECTORS)), begun)
    assert ports.of(RunStarted)[0].connector_id == "other"


async def test_the_assistants_connector_answers_a_run_that_names_none():
    from agentstream_runner.assistants import Assistant

    ports = FakePorts()
    ctx = make_ctx(ports, make_settings(connectors=TWO_CONNECTORS))
    ctx = replace_assistants(ctx, Assistant(id="default", name="Default", connector="other"))
    await run_pipeline(ctx, start_run("hi"))
    assert ports.of(RunStarted)[0].connector_id == "other"


def replace_assistants(ctx: RunContext, *assistants: Any) -> RunContext:
    from dataclasses import replace

    settings = make_settings(connectors=TWO_CONNECTORS)
    return replace(ctx, assistants=Assistants(settings, assistants))
