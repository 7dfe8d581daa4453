"""SIGTERM to agent-runner in the middle of a run: the run completes whole, then the process exits.

The runner is a real `agentstream serve` process, stopped as Kubernetes stops a pod. While it
drains (`shutdown.grace_s`) its run streams on, calls a tool and gets the result back through
the subscription it still reads, and ends `completed` with no cut: one model request per turn,
none closed early, no resume. A run sent to the draining runner does not start there: it is
left on `runs` and the next runner starts it whole.
"""

from __future__ import annotations

import asyncio

import pytest

from agentstream.contracts import ReplyTarget, RunFinished, StartRun, User
from agentstream.host import ServiceHost
from agentstream.kafka import create_topics, free_port
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from tests.chaos.processes import ServiceProcess, service_env
from tests.chaos.test_chaos_runner_kill import endings, has_delta

pytestmark = pytest.mark.chaos

FIRST_TEXT = " ".join(f"first{i}" for i in range(12))
ANSWER = " ".join(f"answer{i}" for i in range(12))
GRACE_S = 40.0


def start(run_id: str, chat: str) -> StartRun:
    return StartRun(
        run_id=run_id,
        conversation_key=f"web:{chat}",
        assistant_id="default",
        user=User(id="u1"),
        text="what is 6*7?",
        reply_target=ReplyTarget(platform="web", chat_id=chat),
    )


def ending_of(records: list[RawRecord], run_id: str) -> RunFinished | None:
    return next((e for e in endings(records) if e.root_run_id == run_id), None)


async def test_sigterm_lets_the_active_run_finish_whole(kafka_bootstrap, topic_prefix, tmp_path):
    async with FakeOpenAI() as fake:
        # The SIGTERM lands in the first turn's stream; its tool call and the second turn follow during the drain.
        fake.add_turn(text=FIRST_TEXT, tool_calls=[("calculator", {"expression": "6*7"})], token_delay_s=0.25)
        fake.add_turn(text=ANSWER, token_delay_s=0.1)
        fake.add_turn(text="the second run's answer")  # the run left for the next runner
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        settings = make_test_settings(
            kafka_bootstrap,
            topic_prefix,
            f"sqlite+aiosqlite:///{tmp_path / 'drain.db'}",
            connectors=connectors,
            default_connector="fake",
        )
        await create_topics(settings.kafka)
        env = service_env(settings, connectors=connectors, default_connector="fake", shutdown__grace_s=str(GRACE_S))
        port = free_port()
        first = ServiceProcess("agent-runner", env, port, tmp_path, "first")
        second = ServiceProcess("agent-runner", env, port, tmp_path, "second")
        tools = bootstrap_tool_executor(settings)
        running, left = start("run-drain-1", "drain-a"), start("run-drain-2", "drain-b")
        bootstrap, runs, events = settings.kafka.bootstrap_servers, f"{topic_prefix}runs", f"{topic_prefix}events"
        try:
            async with ServiceHost([tools], "127.0.0.1", {tools.name: free_port()}):
                await first.start()
                await produce_raw(bootstrap, runs, running.to_json(), key=running.conversation_key.encode())
                await read_until(bootstrap, events, has_delta, timeout=30)
                first.sigterm()
                # Sent to the draining runner: not started there, not lost either.
                await asyncio.sleep(0.5)
                await produce_raw(bootstrap, runs, left.to_json(), key=left.conversation_key.encode())

                records = await read_until(
                    bootstrap, events, lambda rs: ending_of(rs, running.run_id) is not None, timeout=GRACE_S
                )
                done = ending_of(records, running.run_id)
                assert done is not None
                assert (done.status, done.reason, done.text) == ("completed", None, ANSWER)
                assert done.usage.llm_calls == 2
                assert await first.exited(timeout=20) == 0
                assert ending_of(records, left.run_id) is None  # it never started on the draining runner
                log = first.log.read_text()
                assert "drained" in log and "cut by the stop" not in log, log[-3000:]

                await second.start()
                records = await read_until(
                    bootstrap, events, lambda rs: ending_of(rs, left.run_id) is not None, timeout=30
                )
                moved = ending_of(records, left.run_id)
                assert moved is not None
                assert (moved.status, moved.text) == ("completed", "the second run's answer")
                assert [e.root_run_id for e in endings(records)] == [running.run_id, left.run_id]  # each once
        finally:
            first.stop()
            second.stop()
    assert fake.request_count == 3  # one request per turn: nothing asked twice
    assert not any(r.closed_early for r in fake.requests)
