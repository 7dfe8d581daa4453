"""A second tool-executor joins while the first runs a call: the call finishes on the first and
its answer is the tool's, not "interrupted" (the first lets the calls of revoked partitions
finish and commits them before they move; docs/decisions.md § Rebalance)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentstream.contracts import ReplyTarget, RunEventAdapter, StartRun, ToolResult, User
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as bootstrap_runner
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from agentstream_tools.registry import Tool, ToolRegistry

pytestmark = pytest.mark.integration

NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}
SLOW_S = 8.0  # well past the time a join takes to revoke the first executor's partitions
calls_started: list[str] = []


async def slow(args: dict[str, Any]) -> str:
    calls_started.append("slow")
    await asyncio.sleep(SLOW_S)
    return "slept well"


def events(records: list[RawRecord]) -> list[object]:
    return [RunEventAdapter.validate_json(r.value) for r in records if r.value]


def ended(records: list[RawRecord]) -> bool:
    return any(b'"run.finished"' in (r.value or b"") for r in records)


async def test_a_call_on_a_revoked_partition_finishes_on_its_executor(settings_factory, topics_created, tmp_path):
    (tmp_path / "assistants").mkdir()
    (tmp_path / "assistants" / "long.yaml").write_text("id: long\nname: Long\ntools: ['long__*']\n")
    calls_started.clear()
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("long__slow", {})])
        fake.add_turn(text="done")
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
            assistants_dir=str(tmp_path / "assistants"),
            tools={"heartbeat_interval_s": 0.3},
        )
        registry = ToolRegistry([Tool("long__slow", "sleeps", NO_ARGS, slow)])
        runner = bootstrap_runner(settings)
        first = bootstrap_tool_executor(settings, tools=registry)
        second = bootstrap_tool_executor(settings, tools=registry)
        start = StartRun(
            run_id="run-executor-handover",
            conversation_key="web:executor-handover",
            assistant_id="long",
            user=User(id="u1"),
            text="use slow",
            reply_target=ReplyTarget(platform="web", chat_id="executor-handover"),
        )
        bootstrap, topics = settings.kafka.bootstrap_servers, runner.topics
        ports = {runner.name: free_port(), first.name: free_port()}
        async with ServiceHost([runner, first], "127.0.0.1", ports):
            await produce_raw(bootstrap, topics.runs, start.to_json(), key=start.conversation_key.encode())
            await read_until(
                bootstrap, topics.events, lambda rs: b'"tool.heartbeat"' in b"".join(r.value or b"" for r in rs)
            )
            async with ServiceHost([second], "127.0.0.1", {second.name: free_port()}):
                records = await read_until(bootstrap, topics.events, ended, timeout=60)
    [result] = [e for e in events(records) if isinstance(e, ToolResult)]
    assert (result.ok, result.content) == (True, "slept well")
    assert calls_started == ["slow"]  # run once, by the first executor
    assert second.registry.get_sample_value("agentstream_tool_call_replays_total", {"outcome": "stopped"}) in (None, 0)
