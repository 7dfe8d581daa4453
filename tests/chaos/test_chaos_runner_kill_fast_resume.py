"""`kill -9` of agent-runner mid-stream, restarted 2 s later: its run continues within seconds.

The restarted runner is assigned the partitions, finds the run started and never finished
(`orphans.py`), ends it `failed(runner_lost)` at once and `resume.auto` continues it from its
checkpoint — long before persistence's watchdog (`resume.stale_after_s` = 30 s here) would have
noticed. The fake LLM server's request log shows that no completed step was requested twice.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime

import pytest
from aiokafka import TopicPartition

from agentstream.contracts import ReplyTarget, StartRun, User
from agentstream.kafka import free_port
from agentstream.kafka.topics import consumer_group
from agentstream_runner.orphans import LOST_ERROR
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import read_to_end, read_until
from tests.chaos.processes import ServiceProcess
from tests.chaos.runner_rig import SLOW_TEXT, RunnerRig, committed_past, endings, has_delta

pytestmark = pytest.mark.chaos

KEY = "web:chaos-fast-resume"
STALE_AFTER_S = 30.0  # the watchdog's: the fast path must be what ends the run
RESTART_AFTER_S = 2.0


def owner_of(run_id: str, runners: list[ServiceProcess]) -> ServiceProcess:
    """The runner whose log shows it running `run_id`."""
    [owner] = [r for r in runners if r.log.exists() and run_id in r.log.read_text(errors="replace")]
    return owner


def orphans_ended_at(runner: ServiceProcess) -> float:
    """When (epoch seconds) `runner` logged ending the runs it found orphaned."""
    for line in runner.log.read_text(errors="replace").splitlines():
        if line.startswith("{") and (entry := json.loads(line)).get("event") == "runs of a lost runner ended":
            return datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()
    raise AssertionError(f"{runner.log} shows no orphaned run ended")


@pytest.mark.parametrize("taken_by", ["restarted", "survivor"])
async def test_killed_runner_run_resumes_as_soon_as_a_runner_has_its_partitions(
    kafka_bootstrap, topic_prefix, tmp_path, taken_by
):
    """`restarted`: the only runner is killed and started again 2 s later. `survivor`: one of two
    runners is killed; the other is assigned its partitions when the group notices."""
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])  # completes before the kill
        fake.add_turn(text=SLOW_TEXT, token_delay_s=0.25)  # the kill lands in here
        fake.add_turn(text="It is 42.")  # what the resumed run gets
        resume = {"auto": True, "stale_after_s": STALE_AFTER_S, "watchdog_interval_s": 0.5, "max_attempts": 1}
        async with RunnerRig(kafka_bootstrap, topic_prefix, tmp_path, fake, resume=resume) as rig:
            first = rig.runner("first")
            second = rig.runner("second", port=None if taken_by == "restarted" else free_port())
            start = StartRun(
                run_id="run-fast-resume-1",
                conversation_key=KEY,
                assistant_id="default",
                user=User(id="u1"),
                text="what is 6*7?",
                reply_target=ReplyTarget(platform="web", chat_id="chaos-fast-resume"),
            )
            bootstrap, events_topic = rig.bootstrap, rig.events_topic
            both = [first] if taken_by == "restarted" else [first, second]
            await rig.start(*both)
            sent = await rig.send(start)
            await read_until(bootstrap, events_topic, has_delta, timeout=30)
            # Killed mid-run, not within the runner's 100 ms auto-commit window (where the next
            # owner reads the StartRun again: test_chaos_runner_kill_uncommitted.py).
            runner_group = consumer_group(rig.settings.kafka, "agent-runner")
            await committed_past(bootstrap, runner_group, TopicPartition(sent.topic, sent.partition), sent.offset)
            killed = owner_of(start.run_id, both)
            killed.kill9()
            taker = second if taken_by == "restarted" else next(r for r in both if r is not killed)
            killed_at = time.monotonic()
            if taken_by == "restarted":
                await asyncio.sleep(RESTART_AFTER_S)
                restarted_at = time.monotonic()
                await second.start()  # ready: it has joined the group and been assigned the partitions
                ready_at = time.monotonic()
            else:
                restarted_at = ready_at = killed_at  # nothing restarts: the other runner takes over

            records = await read_until(bootstrap, events_topic, lambda rs: len(endings(rs)) >= 2, timeout=60)
            done_at, done_wall = time.monotonic(), time.time()
            lost, done = endings(records)[:2]
            ended_at = orphans_ended_at(taker)
            restart = (
                f"{done_at - ready_at:.1f} s after it was ready, {done_at - restarted_at:.1f} s after the restart, "
                if taken_by == "restarted"
                else ""
            )
            print(
                f"\n{taken_by}: resumed answer complete {done_wall - ended_at:.1f} s after the runner assigned "
                f"the partitions ended the orphaned run, {restart}{done_at - killed_at:.1f} s after the kill "
                f"(the watchdog: {STALE_AFTER_S:g} s of silence)"
            )
            # Ended by the runner that took the partitions (its log says so, and its error is not the
            # watchdog's "no event for 30 s"); how soon is printed above, measured in bench/.
            assert (lost.status, lost.reason, lost.error) == ("failed", "runner_lost", LOST_ERROR)
            assert lost.root_run_id == start.run_id
            assert lost.usage.llm_calls == 1  # the tool-calling turn had completed
            assert (done.status, done.text, done.root_run_id) == ("completed", "It is 42.", start.run_id)
            assert done.seq > lost.seq
            assert done.usage.llm_calls == 2  # the completed turn carried over, the resumed one added
            await asyncio.sleep(1.0)  # nothing more ends it: no second ending, no second resume
            assert len(endings(await read_to_end(bootstrap, events_topic))) == 2
    # turn 1 once; turn 2 killed, then asked again with the very same memory (after the tool step).
    assert fake.request_count == 3
    assert fake.requests[2].messages == fake.requests[1].messages
    assert fake.requests[0].messages != fake.requests[1].messages
