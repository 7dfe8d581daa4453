"""Long tool calls on the real broker: the executor's heartbeats keep a slow call's run alive past
persistence's stale window, and a call past its timeout is a tool error the model answers from.

agent-runner, tool-executor and persistence in one host, the model the fake OpenAI-compatible
server. The watchdog's stale window is 4 s and the runner's own heartbeat 30 s, so during a
call only the executor's `tool.heartbeat`s tell persistence the run is alive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentstream.config import Settings
from agentstream.contracts import (
    FinishReason,
    ReplyTarget,
    RunEventAdapter,
    RunFinished,
    StartRun,
    ToolHeartbeat,
    ToolResult,
    User,
)
from agentstream.contracts.events import AnyRunEvent
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_runner.bootstrap import bootstrap as bootstrap_runner
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from agentstream_tools.registry import Tool, ToolRegistry

pytestmark = pytest.mark.integration

NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}
# The stale window is 13 heartbeats long: from the tool call's request to the executor's first heartbeat
# (its read of the call, then one interval) a loaded CI machine took more than 1.5 s once.
STALE_AFTER_S = 4.0
SLOW_S = 8.0  # well past the stale window
STUCK_TIMEOUT_S = 6.0  # past the stale window too, far below the runner's tool_timeout_s


async def slow(args: dict[str, Any]) -> str:
    await asyncio.sleep(SLOW_S)
    return "slept well"


async def stuck(args: dict[str, Any]) -> str:
    await asyncio.sleep(3600)
    return "never"


TOOLS = [
    Tool("long__slow", "sleeps a while", NO_ARGS, slow),
    Tool("long__stuck", "never answers", NO_ARGS, stuck, timeout_s=STUCK_TIMEOUT_S),
]


def run_events(records: list[RawRecord], run_id: str) -> list[AnyRunEvent]:
    events = [RunEventAdapter.validate_json(r.value) for r in records if r.value]
    return [e for e in events if e.root_run_id == run_id]


def finished(records: list[RawRecord], run_id: str) -> list[RunFinished]:
    return [e for e in run_events(records, run_id) if isinstance(e, RunFinished)]


async def run_one(
    settings_factory: Callable[..., Settings], tool: str, answer: str, tmp_path: Path
) -> tuple[FakeOpenAI, list[Any]]:
    """One run of an assistant offered the test's tools, whose model calls `long__<tool>` then answers
    `answer`; its events once it has finished and the watchdog had time to (wrongly) add an ending of its own."""
    run_id = f"run-{tool}"
    (tmp_path / "assistants").mkdir()
    (tmp_path / "assistants" / "long.yaml").write_text("id: long\nname: Long\ntools: ['long__*']\n")
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[(f"long__{tool}", {})])
        fake.add_turn(text=answer)
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
            assistants_dir=str(tmp_path / "assistants"),
            runner={"heartbeat_s": 30.0},
            tools={"heartbeat_interval_s": 0.3},
            resume={"auto": False, "stale_after_s": STALE_AFTER_S, "watchdog_interval_s": 0.1},
        )
        services = [
            bootstrap_runner(settings),
            bootstrap_tool_executor(settings, tools=ToolRegistry(TOOLS)),
            bootstrap_persistence(settings),
        ]
        topics = services[0].topics
        start = StartRun(
            run_id=run_id,
            conversation_key=f"web:{tool}",
            assistant_id="long",
            user=User(id="u1"),
            text=f"use {tool}",
            reply_target=ReplyTarget(platform="web", chat_id=tool),
        )
        async with ServiceHost(services, "127.0.0.1", {s.name: free_port() for s in services}):
            bootstrap = settings.kafka.bootstrap_servers
            await produce_raw(bootstrap, topics.runs, start.to_json(), key=start.conversation_key.encode())
            ended: Callable[[list[RawRecord]], bool] = lambda rs: len(finished(rs, run_id)) >= 1  # noqa: E731
            await read_until(bootstrap, topics.events, ended, timeout=40)
            await asyncio.sleep(STALE_AFTER_S + 0.5)  # a watchdog ending would be published by now
            records = await read_until(bootstrap, topics.events, ended)
        return fake, run_events(records, run_id)


@pytest.mark.timeout(120)  # services start, an 8 s tool, a watchdog window after the end
async def test_a_slow_call_longer_than_the_stale_window_completes_and_the_run_finishes(
    settings_factory, topics_created, tmp_path
):
    fake, events = await run_one(settings_factory, "slow", "It slept well.", tmp_path)

    [end] = [e for e in events if isinstance(e, RunFinished)]  # no runner_lost ending beside it
    assert (end.status, end.reason, end.text) == ("completed", None, "It slept well.")
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert (result.ok, result.content) == (True, "slept well")
    beats = [e for e in events if isinstance(e, ToolHeartbeat)]
    assert len(beats) >= int(SLOW_S / 0.3) // 2  # every 0.3 s during the 8 s call (a loaded loop runs late)
    assert all(b.call_id == result.call_id and b.tool == "long__slow" for b in beats)
    assert max(b.elapsed_ms for b in beats) > STALE_AFTER_S * 1000
    assert fake.request_count == 2


@pytest.mark.timeout(90)
async def test_a_call_past_its_timeout_is_a_tool_error_and_the_run_completes(
    settings_factory, topics_created, tmp_path
):
    fake, events = await run_one(settings_factory, "stuck", "The tool took too long.", tmp_path)

    [end] = [e for e in events if isinstance(e, RunFinished)]
    assert (end.status, end.reason, end.text) == ("completed", None, "The tool took too long.")
    assert end.reason != FinishReason.RUNNER_LOST
    [result] = [e for e in events if isinstance(e, ToolResult)]
    expected = f"tool long__stuck timed out after {STUCK_TIMEOUT_S:g} s"
    assert (result.ok, result.error, result.retryable) == (False, expected, False)
    assert any(isinstance(e, ToolHeartbeat) for e in events)  # alive until the timeout
    # The model read the error and answered from it.
    assert fake.requests[1].messages[-1]["content"] == f"error: {expected}"
