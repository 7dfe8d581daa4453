"""The launcher without Kafka: an unexpected exception inside a run ends it `failed` with the
error, leaves a resume checkpoint, and the next run of the same conversation works; runs
that never ran end once; the double-texting policy of a message."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from agentstream.config import ConnectorSettings, load_settings
from agentstream.contracts import (
    AnswerApproval,
    ApprovalDecision,
    DoubleTexting,
    EventBase,
    Notice,
    ReplyTarget,
    RunFinished,
    RunOptions,
    RunStarted,
    StartRun,
    ToolCallRequest,
    ToolCallResult,
    Usage,
    User,
)
from agentstream.db.models import Base, Run
from agentstream_persistence.buffers import BufferSet
from agentstream_persistence.rows import rows_for
from agentstream_runner.assistants import Assistants
from agentstream_runner.connectors.base import LLMRequest, TextDelta, UsageChunk
from agentstream_runner.connectors.resolve import Connectors
from agentstream_runner.context import RunContext, RunControl
from agentstream_runner.conversations.owner import Dismissal
from agentstream_runner.conversations.registry import Conversations
from agentstream_runner.launcher import RunLauncher, policy_of


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
        RunContext(ports, Connectors(settings, {"scripted": FlakyConnector}), assistants, settings.runner),
        None,
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


async def test_runs_that_never_ran_still_end_once():
    settings = load_settings()
    ports = Ports()
    launcher = RunLauncher(
        RunContext(ports, Connectors(settings), Assistants(settings), settings.runner), None, structlog.get_logger()
    )

    def start(run_id: str) -> StartRun:
        return StartRun(
            run_id=run_id,
            conversation_key="web:c1",
            assistant_id="default",
            text="x",
            reply_target=ReplyTarget(platform="web", chat_id="c1"),
        )

    await launcher.dismiss(start("rej"), Dismissal.REJECTED, "a run is already in progress")
    await launcher.dismiss(start("mer"), Dismissal.MERGED, "first")
    await launcher.dismiss(start("reb"), Dismissal.DROPPED, "rebalanced")
    await launcher.dismiss(start("shu"), Dismissal.DROPPED, "shutdown")
    notice, *endings = ports.events
    assert isinstance(notice, Notice) and notice.run_id == "rej"
    assert notice.text == "Still working on your previous message; this one was not sent. Try again when it is done."
    assert notice.reply_target == ReplyTarget(platform="web", chat_id="c1")
    assert all(isinstance(e, RunFinished) for e in endings)
    assert [(e.run_id, e.status, e.reason) for e in endings] == [
        ("rej", "failed", "rejected"),
        ("mer", "completed", "merged"),
        ("reb", "failed", "rebalanced"),
        ("shu", "interrupted", "shutdown"),
    ]
    assert [e.seq for e in ports.events] == [1, 2, 1, 1, 1]  # after the run.queued (seq 0) of each


async def test_the_runners_notices_are_the_platforms_configured_texts():
    texts = {"default": {"busy": "Moment, noch beschäftigt."}, "telegram": {"no_pending_approval": "Nichts offen."}}
    settings = load_settings(runner={"texts": texts})
    ports = Ports()
    launcher = RunLauncher(
        RunContext(ports, Connectors(settings), Assistants(settings), settings.runner), None, structlog.get_logger()
    )
    start = StartRun(
        run_id="rej",
        conversation_key="web:c1",
        assistant_id="default",
        text="x",
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
    )
    await launcher.dismiss(start, Dismissal.REJECTED, "a run is already in progress")
    for platform in ("telegram", "web"):
        await launcher.no_pending_approval(
            AnswerApproval(
                conversation_key=f"{platform}:c1",
                decision=ApprovalDecision.APPROVE,
                user_id="u1",
                reply_target=ReplyTarget(platform=platform, chat_id="c1"),
            )
        )
    assert [e.text for e in ports.events if isinstance(e, Notice)] == [
        "Moment, noch beschäftigt.",  # web: the default's
        "Nichts offen.",  # telegram's own
        "There is no tool call waiting for approval.",  # web: neither sets it, the built-in
    ]


async def test_a_start_of_a_run_already_stored_starts_nothing(tmp_path):
    """A StartRun read again after its runner died inside the commit window, once persistence has
    stored the run's ending (docs/decisions.md § Orphaned runs): no event, no model call; the
    owner learns the run did not start, so a ResumeRun held behind it runs next."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    async with sessions() as session, session.begin():
        session.add(Run(run_id="stored", root_run_id="stored", conversation_key="web:c1", status="failed"))
    settings = load_settings(runner={"coalesce_ms": 0})
    ports = Ports()
    launcher = RunLauncher(
        RunContext(ports, Connectors(settings), Assistants(settings), settings.runner), sessions, structlog.get_logger()
    )
    control = RunControl()
    await launcher.run(start("stored"), control)
    assert ports.events == [] and control.not_started
    with launcher.taken_runs.scanning() as found:
        found.add("taken")
    control = RunControl()
    await launcher.run(start("taken"), control)
    assert ports.events == [] and control.not_started
    control = RunControl()
    await launcher.run(start("new"), control)
    assert not control.not_started and [e.run_id for e in ports.endings()] == ["new"]
    await engine.dispose()


class HeldConnector:
    """Answers once `release` is set: the run stays in its model call until then."""

    id = "held"
    capabilities = frozenset({"tools", "streaming"})
    release = asyncio.Event()

    def __init__(self, config: ConnectorSettings) -> None:
        pass

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Any, None]:
        await HeldConnector.release.wait()
        yield TextDelta("done")
        yield UsageChunk(Usage(prompt_tokens=1, completion_tokens=1, llm_calls=1))


async def test_the_runs_in_flight_publish_their_run_started_again_as_it_was():
    """After a restarted embedded broker (docs/decisions.md "Broker loss"): same event, same seq."""
    settings = load_settings(
        connectors=[{"id": "held", "type": "scripted"}], default_connector="held", runner={"coalesce_ms": 0}
    )
    ports = Ports()
    launcher = RunLauncher(
        RunContext(ports, Connectors(settings, {"scripted": HeldConnector}), Assistants(settings), settings.runner),
        None,
        structlog.get_logger(),
    )
    owners = Conversations(launcher.run, launcher.policy_for, launcher.dismiss)
    HeldConnector.release = asyncio.Event()
    assert owners.started_runs() == []
    owners.submit(start("run-1"))
    async with asyncio.timeout(5), ports.changed:
        await ports.changed.wait_for(lambda: any(isinstance(e, RunStarted) for e in ports.events))
    [started] = [e for e in ports.events if isinstance(e, RunStarted)]
    assert owners.started_runs() == [started]
    await launcher.republish_started(owners.started_runs())
    assert ports.events[-1] is started
    HeldConnector.release.set()
    async with asyncio.timeout(5), ports.changed:
        await ports.changed.wait_for(lambda: len(ports.endings()) == 1)
    assert ports.endings()[0].status == "completed" and ports.endings()[0].seq > started.seq
    await owners.close()
    assert owners.started_runs() == []
