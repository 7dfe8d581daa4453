"""Acceptance 12 and the resume seams, without Kafka: an unexpected exception inside a
run ends it `failed` with the error, leaves a resume checkpoint, and the next run of the
same conversation works; resume picks a memory the model can be called with."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import structlog

from agentstream.config import ConnectorSettings, load_settings
from agentstream.contracts import (
    ChatMessage,
    DoubleTexting,
    EventBase,
    ReplyTarget,
    ResumeRun,
    RunFinished,
    RunOptions,
    StartRun,
    ToolCallRequest,
    ToolCallResult,
    ToolCallSpec,
    Usage,
    User,
)
from agentstream_persistence.buffers import BufferSet
from agentstream_persistence.rows import rows_for
from agentstream_runner.assistants import Assistants
from agentstream_runner.connectors import Connectors, LLMRequest, TextDelta, UsageChunk
from agentstream_runner.outcome import RunOutcome, RunState
from agentstream_runner.owners import Conversations
from agentstream_runner.ownership import RunLauncher, policy_of
from agentstream_runner.resume import Checkpoint, SavedStep, callable_memory, start_of

USER = ChatMessage(role="user", content="q")


class FlakyConnector:
    """Streams a little, then crashes with a bug — only on the first call."""

    id = "flaky"
    capabilities = frozenset({"tools", "streaming"})
    calls = 0

    def __init__(self, config: ConnectorSettings) -> None:
        pass

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Any, None]:
        FlakyConnector.calls += 1
        yield TextDelta("Hel")
        if FlakyConnector.calls == 1:
            raise KeyError("bug in the connector")
        yield TextDelta("lo")
        yield UsageChunk(Usage(prompt_tokens=3, completion_tokens=1, llm_calls=1))


class Ports:
    def __init__(self) -> None:
        self.events: list[EventBase] = []
        self.changed = asyncio.Condition()

    async def publish_event(self, event: EventBase) -> None:
        self.events.append(event)
        async with self.changed:
            self.changed.notify_all()

    def endings(self) -> list[RunFinished]:
        return [e for e in self.events if isinstance(e, RunFinished)]

    async def call_tool(self, request: ToolCallRequest) -> ToolCallResult:
        raise AssertionError("no tools here")


def start(run_id: str) -> StartRun:
    return StartRun(
        run_id=run_id,
        conversation_key="web:c1",
        assistant_id="default",
        user=User(id="u1"),
        text="hi",
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
    )


async def test_an_unexpected_exception_ends_failed_with_a_checkpoint_and_the_next_run_works():
    settings = load_settings(
        connectors=[{"id": "flaky", "type": "scripted"}], default_connector="flaky", runner={"coalesce_ms": 0}
    )
    ports = Ports()
    assistants = Assistants(settings)
    launcher = RunLauncher(
        ports,
        Connectors(settings, {"scripted": FlakyConnector}),
        assistants,
        settings.runner,
        lambda: None,
        structlog.get_logger(),
    )
    owners = Conversations(launcher.run, launcher.policy_for, launcher.dismiss)
    FlakyConnector.calls = 0
    owners.submit(start("run-1"))
    owners.submit(start("run-2"))
    async with asyncio.timeout(5), ports.changed:
        await ports.changed.wait_for(lambda: len(ports.endings()) == 2)
    first, second = ports.endings()
    assert (first.run_id, first.status) == ("run-1", "failed")
    assert first.error == "internal error: KeyError: 'bug in the connector'"
    assert (second.run_id, second.status, second.text) == ("run-2", "completed", "Hello")

    buffers = BufferSet()
    for event in ports.events:
        buffers.add(event)  # type: ignore[arg-type]
    buf = buffers.get("run-1")
    assert buf is not None
    rows = rows_for(buf)
    assert rows.checkpoint is not None and rows.checkpoint.checkpoint["status"] == "failed"
    assert rows.checkpoint.checkpoint["start"]["user_id"] == "u1"
    assert [m["content"] for m in rows.messages if m["role"] == "assistant"] == ["Hel"]  # what was streamed


def test_rebalance_stops_fail_other_stops_interrupt():
    outcome = RunOutcome(started_at=0.0)
    outcome.stop("rebalanced")
    assert (outcome.state, outcome.reason, outcome.error) == (RunState.FAILED, "rebalanced", "run stopped: rebalanced")
    outcome = RunOutcome(started_at=0.0)
    outcome.stop("user")
    assert (outcome.state, outcome.reason) == (RunState.INTERRUPTED, "user")


def test_policy_comes_from_the_request_then_the_assistant():
    assistants = Assistants(load_settings())
    s = start("r")
    assert policy_of(assistants, s) is DoubleTexting.ENQUEUE
    assert policy_of(assistants, s.model_copy(update={"options": RunOptions(double_texting="reject")})) is (
        DoubleTexting.REJECT
    )
    assert policy_of(
        assistants, s.model_copy(update={"options": RunOptions.model_validate({"double_texting": "bogus"})})
    ) is (DoubleTexting.ENQUEUE)
    assert policy_of(assistants, s.model_copy(update={"assistant_id": "nope"})) is DoubleTexting.ENQUEUE


def test_resume_memory_skips_an_llm_step_whose_tool_round_never_completed():
    call = ChatMessage(role="assistant", tool_calls=[ToolCallSpec(id="c1", name="clock")])
    tool = ChatMessage(role="tool", content="noon", tool_call_id="c1")
    call2 = ChatMessage(role="assistant", tool_calls=[ToolCallSpec(id="c2", name="clock")])
    steps = [
        SavedStep("llm-1", "llm", [USER, call]),
        SavedStep("tool-2", "tool", [USER, call, tool]),
        SavedStep("llm-3", "llm", [USER, call, tool, call2]),
    ]
    assert callable_memory(steps) == [USER, call, tool]
    assert callable_memory(steps[:1]) is None
    assert callable_memory([]) is None


def test_the_resumed_start_is_rebuilt_from_the_checkpoint():
    checkpoint = Checkpoint(
        root_run_id="r1",
        conversation_key="web:c1:t",
        status="interrupted",
        last_seq=9,
        usage=Usage(),
        start={
            "assistant_id": "helper",
            "user_id": "u1",
            "session_id": "s1",
            "connector_id": "fake",
            "reply_target": None,
            "input": [USER.model_dump()],
            "text": "",
        },
    )
    s = start_of(ResumeRun(conversation_key="web:c1:t", run_id="r1"), checkpoint)
    assert (s.run_id, s.assistant_id, s.user.id, s.session_id, s.text) == ("r1", "helper", "u1", "s1", "q")
    assert s.options.as_dict() == {"connector": "fake"}
    assert (s.reply_target.platform, s.reply_target.chat_id, s.reply_target.thread_id) == ("web", "c1", "t")
