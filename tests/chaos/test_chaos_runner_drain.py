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
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import RawRecord, read_until
from tests.chaos.runner_rig import RunnerRig, endings, has_delta

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
        # The draining runner's grace period, and none of the rig's heartbeat and coalescing.
        async with RunnerRig(
            kafka_bootstrap,
            topic_prefix,
            tmp_path,
            fake,
            in_process=("tool-executor",),
            runner_env={"shutdown__grace_s": str(GRACE_S)},
        ) as rig:
            first, second = rig.runner("first"), rig.runner("second")
            running, left = start("run-drain-1", "drain-a"), start("run-drain-2", "drain-b")
            bootstrap, events = rig.bootstrap, rig.events_topic
            await rig.start(first)
            await rig.send(running)
            await read_until(bootstrap, events, has_delta, timeout=30)
            first.sigterm()
            # Sent to the draining runner: not started there, not lost either.
            await asyncio.sleep(0.5)
            await rig.send(left)

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
            records = await read_until(bootstrap, events, lambda rs: ending_of(rs, left.run_id) is not None, timeout=30)
            moved = ending_of(records, left.run_id)
            assert moved is not None
            assert (moved.status, moved.text) == ("completed", "the second run's answer")
            assert [e.root_run_id for e in endings(records)] == [running.run_id, left.run_id]  # each once
    assert fake.request_count == 3  # one request per turn: nothing asked twice
    assert not any(r.closed_early for r in fake.requests)
