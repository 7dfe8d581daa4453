"""`kill -9` of agent-runner during a slow stream.

persistence's watchdog ends the run `failed(runner_lost)` (a short `stale_after`), and
with `resume.auto` the run completes on a restarted runner; the fake LLM server's
request log shows that no completed LLM step was requested twice.
"""

from __future__ import annotations

import pytest

from agentstream.contracts import ReplyTarget, StartRun, User
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import read_until
from tests.chaos.runner_rig import SLOW_TEXT, RunnerRig, endings, has_delta

pytestmark = pytest.mark.chaos

KEY = "web:chaos-runner"


async def test_runner_killed_mid_stream_is_declared_lost_then_resumed(kafka_bootstrap, topic_prefix, tmp_path):
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])  # completes before the kill
        fake.add_turn(text=SLOW_TEXT, token_delay_s=0.25)  # the kill lands in here
        fake.add_turn(text="It is 42.")  # what the resumed run gets
        resume = {"auto": True, "stale_after_s": 2.0, "watchdog_interval_s": 0.2, "max_attempts": 1}
        async with RunnerRig(kafka_bootstrap, topic_prefix, tmp_path, fake, resume=resume) as rig:
            first, second = rig.runner("first"), rig.runner("second")
            start = StartRun(
                run_id="run-chaos-1",
                conversation_key=KEY,
                assistant_id="default",
                user=User(id="u1"),
                text="what is 6*7?",
                reply_target=ReplyTarget(platform="web", chat_id="chaos-runner"),
            )
            await rig.start(first)  # the group joins overlap
            await rig.send(start)
            await read_until(rig.bootstrap, rig.events_topic, has_delta, timeout=30)
            first.kill9()

            # The watchdog: no event for 2 s → failed(runner_lost), on the stream for delivery to see.
            records = await read_until(rig.bootstrap, rig.events_topic, lambda rs: len(endings(rs)) >= 1, timeout=20)
            [lost] = endings(records)
            assert (lost.status, lost.reason, lost.root_run_id) == ("failed", "runner_lost", start.run_id)
            assert lost.usage.llm_calls == 1  # the tool-calling turn had completed

            # resume.auto issued a ResumeRun; a restarted runner picks it up and completes the run.
            await second.start()
            records = await read_until(rig.bootstrap, rig.events_topic, lambda rs: len(endings(rs)) >= 2, timeout=60)
            done = endings(records)[1]
            assert (done.status, done.text, done.root_run_id) == ("completed", "It is 42.", start.run_id)
            assert done.seq > lost.seq
    # turn 1 once; turn 2 killed, then asked again with the very same memory (after the tool step).
    assert fake.request_count == 3
    assert fake.requests[2].messages == fake.requests[1].messages
    assert fake.requests[0].messages != fake.requests[1].messages
