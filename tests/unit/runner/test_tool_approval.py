"""The approval gate inside a real run: fake model server (real HTTP), real tool code,
a catalogue entry marking `calculator` as needing approval."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from agentstream.config import RunnerTexts, load_settings
from agentstream.contracts import (
    AnswerApproval,
    ApprovalDecision,
    ApprovalOutcome,
    ApprovalRequest,
    ChatMessage,
    MessageRole,
    Notice,
    PendingCall,
    ReplyTarget,
    StepCompleted,
    StepType,
    ToolCallSpec,
    ToolCatalogEntry,
    ToolKind,
    ToolResult,
    utcnow,
)
from agentstream_runner.approvals import ApprovalWaiters
from agentstream_runner.assistants import Assistants
from agentstream_runner.connectors.resolve import Connectors
from agentstream_runner.context import RunContext
from agentstream_runner.pipeline import ResumePoint, run_pipeline
from agentstream_runner.tool_approval import DENIED_ERROR, EXPIRED_ERROR, prompt_text
from agentstream_runner.tool_catalog import ToolCatalog
from agentstream_testing.fake_openai import FakeOpenAI
from tests.unit.runner.runner_harness import Ports, openai_connector, start_run

KEY = "web:c1"  # the harness's conversation


def catalog() -> ToolCatalog:
    tools = ToolCatalog()
    tools.apply(
        ToolCatalogEntry(
            tool="calculator",
            kind=ToolKind.BUILTIN,
            executor_id="ex-1",
            available=True,
            requires_approval=True,
            heartbeat_s=60,
        )
    )
    return tools


def context(
    fake: FakeOpenAI,
    ports: Ports,
    waiters: ApprovalWaiters,
    expiry_s: float = 30,
    tools: ToolCatalog | None = None,
    texts: dict[str, dict[str, str]] | None = None,
) -> RunContext:
    runner = {"coalesce_ms": 0, "approval_expiry_s": expiry_s, "texts": texts or {}}
    config = load_settings(connectors=[openai_connector(fake)], runner=runner)
    return RunContext(
        ports=ports,
        connectors=Connectors(config),
        assistants=Assistants(config),
        runner=config.runner,
        tools=tools if tools is not None else catalog(),
        approvals=waiters,
    )


def answer(decision: ApprovalDecision, user: str, admin: bool = False) -> AnswerApproval:
    return AnswerApproval(
        conversation_key=KEY,
        decision=decision,
        user_id=user,
        admin=admin,
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
    )


async def until(check, timeout: float = 20) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not check():  # noqa: ASYNC110 - state of the run under test, polled
            await asyncio.sleep(0.01)


def notices(ports: Ports) -> list[Notice]:
    return ports.of(Notice)


@pytest.mark.timeout(30)  # the module's first run imports the model SDK: seconds on a loaded machine
async def test_the_run_waits_then_an_approval_runs_the_call():
    waiters, ports = ApprovalWaiters(), Ports()
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        fake.add_turn(text="It is 42.")
        run = asyncio.create_task(run_pipeline(context(fake, ports, waiters), start_run("6*7?")))
        await until(lambda: len(waiters) == 1)
        assert ports.tool_requests == []  # paused: nothing ran
        [prompt] = notices(ports)
        assert prompt.approval is not None and prompt.approval.user_id == "u1"
        assert [(c.tool, c.arguments) for c in prompt.approval.calls] == [("calculator", '{"expression": "6*7"}')]
        assert prompt.text == prompt_text(prompt.approval, 30, RunnerTexts())
        assert prompt.text == (
            "Approval needed: the assistant wants to run\n"
            '• calculator {"expression": "6*7"}\n'
            "Answer /approve or /deny (expires in 30 s)."
        )
        # The checkpoint: an approval step whose output is the request, memory ending in the call.
        [saved] = [e for e in ports.of(StepCompleted) if e.step_type == StepType.APPROVAL]
        assert ApprovalRequest.model_validate(saved.output) == prompt.approval
        assert saved.memory[-1].tool_calls[0].name == "calculator"

        assert waiters.deliver(answer(ApprovalDecision.APPROVE, "u1"))
        await asyncio.wait_for(run, 5)
    [result] = ports.of(ToolResult)
    assert result.ok and result.content == "42"
    # The executor is shown who approved it: the request's id travels in the call (signed by the ports).
    [request] = ports.tool_requests
    assert request.approval_id == prompt.approval.approval_id
    assert notices(ports)[-1].approval_outcome == ApprovalOutcome.APPROVED
    assert notices(ports)[-1].text == "Approved by u1: running calculator."
    assert ports.finished.status == "completed" and ports.finished.text == "It is 42."
    assert len(waiters) == 0


async def test_another_user_is_refused_visibly_and_an_admin_denial_is_a_tool_error():
    waiters, ports = ApprovalWaiters(), Ports()
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        fake.add_turn(text="I was not allowed.")
        run = asyncio.create_task(run_pipeline(context(fake, ports, waiters), start_run("6*7?")))
        await until(lambda: len(waiters) == 1)
        waiters.deliver(answer(ApprovalDecision.APPROVE, "mallory"))
        await until(lambda: len(notices(ports)) == 2)
        assert notices(ports)[1].text.startswith("Only the user who asked (u1) or an admin can /approve this")
        assert not run.done() and ports.tool_requests == []
        waiters.deliver(answer(ApprovalDecision.DENY, "boss", admin=True))
        await asyncio.wait_for(run, 5)
        model_saw = fake.requests[1].body["messages"][-1]
    assert ports.tool_requests == []
    [result] = ports.of(ToolResult)
    assert (result.ok, result.error, result.retryable) == (False, DENIED_ERROR, False)
    assert model_saw == {"role": "tool", "content": f"error: {DENIED_ERROR}", "tool_call_id": "call_1"}
    assert notices(ports)[-1].text == "Denied by boss: calculator not run."
    assert ports.finished.status == "completed" and ports.finished.text == "I was not allowed."


async def test_the_notices_are_the_platforms_configured_texts():
    texts = {
        "default": {"denied": "nobody sees this: web sets its own"},
        "web": {
            "approval_needed": "Freigabe nötig:",
            "approval_call": "- {tool}",
            "approval_answer": "/approve oder /deny ({expires})",
            "approval_not_yours": "Nur {user} darf /{command}.",
            "denied": "{tools} abgelehnt von {user}.",
        },
        "telegram": {"approval_needed": "nobody sees this either: the run answers on web"},
    }
    waiters, ports = ApprovalWaiters(), Ports()
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        fake.add_turn(text="Abgelehnt.")
        run = asyncio.create_task(run_pipeline(context(fake, ports, waiters, texts=texts), start_run("6*7?")))
        await until(lambda: len(waiters) == 1)
        waiters.deliver(answer(ApprovalDecision.APPROVE, "mallory"))
        await until(lambda: len(notices(ports)) == 2)
        waiters.deliver(answer(ApprovalDecision.DENY, "u1"))
        await asyncio.wait_for(run, 5)
    assert [n.text for n in notices(ports)] == [
        "Freigabe nötig:\n- calculator\n/approve oder /deny (30 s)",
        "Nur u1 darf /approve.",
        "calculator abgelehnt von u1.",
    ]


async def test_an_unanswered_request_expires_with_a_notice():
    waiters, ports = ApprovalWaiters(), Ports()
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        fake.add_turn(text="Nobody approved.")
        await asyncio.wait_for(run_pipeline(context(fake, ports, waiters, expiry_s=0.2), start_run("6*7?")), 5)
    [result] = ports.of(ToolResult)
    assert (result.ok, result.error) == (False, EXPIRED_ERROR)
    assert notices(ports)[-1].approval_outcome == ApprovalOutcome.EXPIRED
    assert notices(ports)[-1].text == "The approval of calculator expired after 0.2 s: not run."
    assert ports.finished.status == "completed"


async def test_a_resumed_run_waits_for_the_same_request_and_its_deadline_stands():
    call = ToolCallSpec(id="call_9", name="calculator", arguments='{"expression": "1+1"}')
    memory = [
        ChatMessage(role=MessageRole.USER, content="1+1?"),
        ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call]),
    ]
    request = ApprovalRequest(
        approval_id="a-1",
        calls=[PendingCall(call_id="call_9", tool="calculator", arguments=call.arguments)],
        user_id="u1",
        expires_at=utcnow() - timedelta(seconds=1),  # passed while the runner was down
    )
    waiters, ports = ApprovalWaiters(), Ports()
    async with FakeOpenAI() as fake:
        fake.add_turn(text="Too late.")
        point = ResumePoint(memory=memory, first_seq=10, approval=request)
        # A runner just started: its catalogue is still empty, the checkpoint alone says the call waits.
        ctx = context(fake, ports, waiters, tools=ToolCatalog())
        await asyncio.wait_for(run_pipeline(ctx, start_run("1+1?"), point), 5)
        assert fake.request_count == 1  # the model was not asked for the call again
    assert not [e for e in ports.of(StepCompleted) if e.step_type == StepType.APPROVAL]  # not asked again
    assert [n.approval for n in notices(ports)] == [None]
    assert notices(ports)[0].approval_outcome == ApprovalOutcome.EXPIRED
    [result] = ports.of(ToolResult)
    assert (result.call_id, result.error) == ("call_9", EXPIRED_ERROR)
    assert ports.finished.text == "Too late."
