"""tool-executor stopped during a call, on the real broker: within `shutdown.grace_s` the call
finishes and its result reaches the run; past it the call is cut and counted
(`agentstream_shutdown_cut_total{what="tool_calls"}`).

The call outlasts the stop's own wait for calls (`DRAIN_S`), so only the drain can let it finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentstream.contracts import ReplyTarget, RunEventAdapter, StartRun, ToolHeartbeat, ToolResult, User
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as bootstrap_runner
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.app import DRAIN_S
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from agentstream_tools.registry import Tool, ToolRegistry

pytestmark = pytest.mark.integration

NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}
SLOW_S = DRAIN_S + 2.0


def sleeper(seconds: float) -> Callable[[dict[str, Any]], Awaitable[str]]:
    async def slow(args: dict[str, Any]) -> str:
        await asyncio.sleep(seconds)
        return "slept well"

    return slow


def results(records: list[RawRecord]) -> list[ToolResult]:
    events = [RunEventAdapter.validate_json(r.value) for r in records if b'"tool.result"' in (r.value or b"")]
    return [e for e in events if isinstance(e, ToolResult)]


def beating(records: list[RawRecord]) -> bool:
    return any(
        isinstance(RunEventAdapter.validate_json(r.value), ToolHeartbeat)
        for r in records
        if b'"tool.heartbeat"' in (r.value or b"")
    )


async def _stop_during_a_call(settings_factory, tmp_path, grace_s: float, slow_s: float = SLOW_S):
    (tmp_path / "assistants").mkdir()
    (tmp_path / "assistants" / "long.yaml").write_text("id: long\nname: Long\ntools: ['long__*']\n")
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("long__slow", {})])
        fake.add_turn(text="done")
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
            assistants_dir=str(tmp_path / "assistants"),
            tools={"heartbeat_interval_s": 0.3},
            shutdown={"grace_s": grace_s},
        )
        runner = bootstrap_runner(settings)
        executor = bootstrap_tool_executor(
            settings, tools=ToolRegistry([Tool("long__slow", "sleeps", NO_ARGS, sleeper(slow_s))])
        )
        start = StartRun(
            run_id=f"run-executor-drain-{grace_s}",
            conversation_key="web:executor-drain",
            assistant_id="long",
            user=User(id="u1"),
            text="use slow",
            reply_target=ReplyTarget(platform="web", chat_id="executor-drain"),
        )
        bootstrap, topics = settings.kafka.bootstrap_servers, runner.topics
        async with ServiceHost([runner], "127.0.0.1", {runner.name: free_port()}):
            executor_host = ServiceHost([executor], "127.0.0.1", {executor.name: free_port()})
            await executor_host.start()
            try:
                await produce_raw(bootstrap, topics.runs, start.to_json(), key=start.conversation_key.encode())
                await read_until(bootstrap, topics.events, beating, timeout=30)  # the call runs
            finally:
                await executor_host.stop()
            if grace_s == 0:  # stopped: a result published on the way out would be on the topic already
                with pytest.raises(TimeoutError):
                    await read_until(bootstrap, topics.events, lambda rs: bool(results(rs)), timeout=3)
                return executor, []
            records = await read_until(
                bootstrap, topics.events, lambda rs: b'"run.finished"' in b"".join(r.value or b"" for r in rs)
            )
    return executor, results(records)


async def test_a_call_within_the_grace_period_is_answered(settings_factory, topics_created, tmp_path):
    executor, [result] = await _stop_during_a_call(settings_factory, tmp_path, grace_s=SLOW_S + 10)
    assert (result.ok, result.content) == (True, "slept well")
    labels = {"service": executor.name, "what": "tool_calls"}
    assert executor.registry.get_sample_value("agentstream_shutdown_cut_total", labels) is None


async def test_a_call_past_the_grace_period_is_cut_and_counted(settings_factory, topics_created, tmp_path):
    # A call that cannot end during the stop's own wait: under load the test saw the call's first
    # heartbeat seconds after it began, and a SLOW_S call ended inside that wait, answered.
    executor, answered = await _stop_during_a_call(settings_factory, tmp_path, grace_s=0, slow_s=3600)
    assert answered == []  # read again by the next executor, answered there as interrupted
    labels = {"service": executor.name, "what": "tool_calls"}
    assert executor.registry.get_sample_value("agentstream_shutdown_cut_total", labels) == 1
