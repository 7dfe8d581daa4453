"""A run paused for tool approval survives its runner's restart with the same deadline.

tool-executor and persistence keep running; the runner holding the paused run stops (the run
ends `interrupted`/`shutdown`, its `approval` step checkpointed), a new runner starts, persistence's
auto-resume hands it the run, and the request expires at its original `expires_at` (not one
expiry period after the resume), without the model being asked for the call again.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from agentstream.contracts import (
    ApprovalOutcome,
    Notice,
    ReplyTarget,
    RunEventAdapter,
    RunFinished,
    RunStarted,
    StartRun,
    ToolResult,
    User,
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_runner.tool_approval import EXPIRED_ERROR
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

pytestmark = pytest.mark.integration

KEY = "web:approval-restart"
EXPIRY_S = 12.0


def events(records: list[RawRecord]) -> list:  # type: ignore[type-arg]
    return [RunEventAdapter.validate_json(r.value) for r in records if r.value]


def of(records: list[RawRecord], kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in events(records) if isinstance(e, kind) and e.conversation_key == KEY]


@pytest.mark.timeout(150)  # two runner starts (group joins) and an expiry
async def test_the_deadline_of_a_paused_approval_survives_a_runner_restart(settings_factory, topics_created):
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        fake.add_turn(text="Nobody approved it.")
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
            runner={"coalesce_ms": 10, "approval_expiry_s": EXPIRY_S},
            tools={"requires_approval": ["calculator"], "catalog_interval_s": 1.0},
        )
        tools, persistence = bootstrap_tool_executor(settings), bootstrap_persistence(settings)
        bootstrap = settings.kafka.bootstrap_servers
        start = StartRun(
            run_id="run-approval-restart",
            conversation_key=KEY,
            assistant_id="default",
            user=User(id="u1"),
            text="what is 6*7?",
            reply_target=ReplyTarget(platform="web", chat_id="approval-restart"),
        )
        async with ServiceHost([tools, persistence], "127.0.0.1", {s.name: free_port() for s in (tools, persistence)}):
            first = runner_bootstrap(settings)
            async with ServiceHost([first], "127.0.0.1", {first.name: free_port()}):
                while not first.tool_catalog.requires_approval("calculator"):  # noqa: ASYNC110 - polled catalogue
                    await asyncio.sleep(0.1)
                await produce_raw(bootstrap, first.topics.runs, start.to_json(), key=KEY.encode())
                records = await read_until(
                    bootstrap, first.topics.events, lambda rs: any(n.approval for n in of(rs, Notice))
                )
                [request] = [n.approval for n in of(records, Notice) if n.approval]
            # The first runner stopped: the run ended, resumable, at its approval step.
            records = await read_until(bootstrap, first.topics.events, lambda rs: len(of(rs, RunFinished)) == 1)
            [ended] = of(records, RunFinished)
            assert (ended.status, ended.reason) == ("interrupted", "shutdown")
            assert fake.request_count == 1 and not of(records, ToolResult)

            # The resume at least 4 s after the request, so the original deadline and one renewed on the
            # resume are more than the expiry's 3 s slack apart (on Kafka a runner restarts in under 1 s).
            asked_at = request.expires_at.timestamp() - EXPIRY_S
            await asyncio.sleep(max(0.0, asked_at + 4 - time.time()))
            second = runner_bootstrap(settings)  # its catalogue starts empty; the checkpoint decides
            async with ServiceHost([second], "127.0.0.1", {second.name: free_port()}):
                records = await read_until(
                    bootstrap, second.topics.events, lambda rs: len(of(rs, RunFinished)) == 2, timeout=EXPIRY_S + 60
                )
        notices = of(records, Notice)
        assert [n.approval for n in notices if n.approval] == [request]  # asked once, never again
        [expired] = [n for n in notices if n.approval_outcome is not None]
        assert expired.approval_outcome is ApprovalOutcome.EXPIRED
        # The original deadline, not extended by the restart (a new one would be EXPIRY_S after the resume):
        # at it when the resume came first, else at once on the resume (the group join can take long).
        resumed_at = of(records, RunStarted)[1].ts.timestamp()
        deadline = request.expires_at.timestamp()
        assert deadline <= expired.ts.timestamp() < max(deadline, resumed_at) + 3 < resumed_at + EXPIRY_S
        [result] = of(records, ToolResult)
        assert (result.ok, result.error) == (False, EXPIRED_ERROR)
        done = of(records, RunFinished)[1]
        assert (done.status, done.text) == ("completed", "Nobody approved it.")
        assert fake.request_count == 2  # the call was not asked for again; one answer after the refusal
