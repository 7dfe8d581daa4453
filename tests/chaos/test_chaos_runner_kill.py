"""`kill -9` of agent-runner during a slow stream.

persistence's watchdog ends the run `failed(runner_lost)` (a short `stale_after`), and
with `resume.auto` the run completes on a restarted runner; the fake LLM server's
request log shows that no completed LLM step was requested twice.
"""

from __future__ import annotations

import asyncio

import pytest

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, StartRun, User
from agentstream.host import ServiceHost
from agentstream.kafka import create_topics, free_port
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from tests.chaos.processes import ServiceProcess, service_env

pytestmark = pytest.mark.chaos

KEY = "web:chaos-runner"
SLOW_TEXT = " ".join(f"word{i}" for i in range(40))


def endings(records: list[RawRecord]) -> list[RunFinished]:
    out = []
    for r in records:
        if b'"run.finished"' in (r.value or b""):
            event = RunEventAdapter.validate_json(r.value)
            if isinstance(event, RunFinished):
                out.append(event)
    return out


def has_delta(records: list[RawRecord]) -> bool:
    return any(b'"message.delta"' in (r.value or b"") for r in records)


async def test_runner_killed_mid_stream_is_declared_lost_then_resumed(kafka_bootstrap, topic_prefix, tmp_path):
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])  # completes before the kill
        fake.add_turn(text=SLOW_TEXT, token_delay_s=0.25)  # the kill lands in here
        fake.add_turn(text="It is 42.")  # what the resumed run gets
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        settings = make_test_settings(
            kafka_bootstrap,
            topic_prefix,
            f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}",
            connectors=connectors,
            default_connector="fake",
            resume={"auto": True, "stale_after_s": 2.0, "watchdog_interval_s": 0.2, "max_attempts": 1},
        )
        await create_topics(settings.kafka)
        env = service_env(
            settings,
            connectors=connectors,
            default_connector="fake",
            runner__heartbeat_s="0.5",
            runner__coalesce_ms="10",
        )
        port = free_port()
        first = ServiceProcess("agent-runner", env, port, tmp_path, "first")
        second = ServiceProcess("agent-runner", env, port, tmp_path, "second")
        persistence, tools = bootstrap_persistence(settings), bootstrap_tool_executor(settings)
        start = StartRun(
            run_id="run-chaos-1",
            conversation_key=KEY,
            assistant_id="default",
            user=User(id="u1"),
            text="what is 6*7?",
            reply_target=ReplyTarget(platform="web", chat_id="chaos-runner"),
        )
        bootstrap, events_topic = settings.kafka.bootstrap_servers, f"{topic_prefix}events"
        try:
            host = ServiceHost(
                [persistence, tools], "127.0.0.1", {persistence.name: free_port(), tools.name: free_port()}
            )
            try:
                await asyncio.gather(host.start(), first.start())  # the group joins overlap
                await produce_raw(bootstrap, f"{topic_prefix}runs", start.to_json(), key=KEY.encode())
                await read_until(bootstrap, events_topic, has_delta, timeout=30)
                first.kill9()

                # The watchdog: no event for 2 s → failed(runner_lost), on the stream for delivery to see.
                records = await read_until(bootstrap, events_topic, lambda rs: len(endings(rs)) >= 1, timeout=20)
                [lost] = endings(records)
                assert (lost.status, lost.reason, lost.root_run_id) == ("failed", "runner_lost", start.run_id)
                assert lost.usage.llm_calls == 1  # the tool-calling turn had completed

                # resume.auto issued a ResumeRun; a restarted runner picks it up and completes the run.
                await second.start()
                records = await read_until(bootstrap, events_topic, lambda rs: len(endings(rs)) >= 2, timeout=60)
                done = endings(records)[1]
                assert (done.status, done.text, done.root_run_id) == ("completed", "It is 42.", start.run_id)
                assert done.seq > lost.seq
            finally:
                await host.stop()
        finally:
            first.stop()
            second.stop()
    # turn 1 once; turn 2 killed, then asked again with the very same memory (after the tool step).
    assert fake.request_count == 3
    assert fake.requests[2].messages == fake.requests[1].messages
    assert fake.requests[0].messages != fake.requests[1].messages
