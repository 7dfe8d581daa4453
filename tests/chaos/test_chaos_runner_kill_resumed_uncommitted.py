"""`kill -9` of agent-runner after it began a *resume* and before its group committed the ResumeRun.

A run whose runner died is ended `runner_lost` and continued from its checkpoint through a
`ResumeRun`. When the runner resuming it dies too, inside its group's auto-commit window, the
ResumeRun is read again by the runner that takes the partition. Resumed once more from the same
checkpoint, the run would number its events after the checkpoint's `last_seq` again — the seqs the
killed resume had used, under what delivery had shown. The taking runner must instead end the
killed resume `runner_lost` (its orphan scan sees it open) and continue the run only from a
checkpoint past everything that resume streamed (docs/decisions.md § Orphaned runs).

The first runner runs the StartRun (committed before it is killed); the second is
`tests.chaos.runner_child` (its auto-commit made rare, so its kill always lands inside the window;
the test checks the group never committed the ResumeRun); the third is `agentstream serve`.
Asserted: no event seq of the run repeats; the run ends lost, lost, completed; the chat shows both
marked partials and the answer, each once; the fake model saw the first turn once and the killed
turn again with the same memory each time.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from agentstream.contracts import ReplyTarget, RunStatus, StartRun, User
from agentstream.kafka.topics import consumer_group
from agentstream_delivery.render import RESUMED_MARKER
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeTelegram
from agentstream_testing.kafka import read_to_end, read_until
from tests.chaos.runner_rig import (
    SLOW_TEXT,
    SLOW_TOKEN_S,
    WITH_DELIVERY,
    RunnerRig,
    committed_offsets,
    committed_past,
    endings,
    partial_of,
    previewing,
    seqs_of,
    shown,
    until,
)

pytestmark = pytest.mark.chaos

CHAT = "-7400"  # a group chat: the preview is an edited message
RUN_ID = "run-resumed-uncommitted-1"
ANSWER = "It is 42."


async def test_a_resume_read_again_after_the_kill_continues_after_what_the_killed_resume_streamed(
    kafka_bootstrap, topic_prefix, tmp_path
):
    async with FakeOpenAI() as fake, FakeTelegram() as tg:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])  # completes under the first runner
        fake.add_turn(text=SLOW_TEXT, token_delay_s=SLOW_TOKEN_S)  # the first runner is killed in here
        fake.add_turn(text=SLOW_TEXT, token_delay_s=SLOW_TOKEN_S)  # the resume on the second: killed in here too
        fake.add_turn(text=ANSWER)  # what the third runner's resume gets
        # The watchdog (30 s) is too slow to matter: the runners' orphan scans end the killed attempts.
        resume = {"auto": True, "stale_after_s": 30.0, "watchdog_interval_s": 0.5, "max_attempts": 2}
        async with RunnerRig(
            kafka_bootstrap, topic_prefix, tmp_path, fake, resume=resume, tg=tg, in_process=WITH_DELIVERY
        ) as rig:
            first = rig.runner("first")
            second = rig.runner("second", module="tests.chaos.runner_child")
            third = rig.runner("third")
            start = StartRun(
                run_id=RUN_ID,
                conversation_key=f"telegram:{CHAT}",
                assistant_id="default",
                user=User(id="u1"),
                text="what is 6*7?",
                reply_target=ReplyTarget(platform="telegram", chat_id=CHAT),
            )
            group = consumer_group(rig.settings.kafka, "agent-runner")
            await rig.start(first)
            sent = await rig.send(start, queued=True)
            # The tool's status line, then the answer's preview, edited at least once: mid-answer.
            await until(lambda: previewing(tg.messages(CHAT), 1), 60, "a preview")
            await committed_past(rig.bootstrap, group, TopicPartition(sent.topic, sent.partition), sent.offset)
            first.kill9()
            tool_line = tg.texts(CHAT)[0]

            # The second runner ends the run (its orphan scan), reads the ResumeRun and resumes it:
            # the resumed answer streams into a message of its own, edited at least once.
            await second.start()
            await until(lambda: previewing(tg.messages(CHAT), 2), 60, "the resume's preview")
            second.kill9()
            resumes = [
                r for r in await read_to_end(rig.bootstrap, rig.runs_topic) if b'"run.resume"' in (r.value or b"")
            ]
            assert len(resumes) == 1, resumes
            committed = (await committed_offsets(rig.bootstrap, group, rig.runs_topic))[resumes[0].partition]
            assert committed is not None and committed <= resumes[0].offset, committed  # inside the window

            await third.start()
            records = await read_until(
                rig.bootstrap,
                rig.events_topic,
                lambda rs: any(e.status is RunStatus.COMPLETED for e in endings(rs)),
                timeout=90,
            )
            *lost, done = endings(records)
            assert [(e.status, e.reason) for e in lost] == [(RunStatus.FAILED, "runner_lost")] * 2, lost
            assert (done.status, done.text, done.root_run_id) == (RunStatus.COMPLETED, ANSWER, RUN_ID)
            first_partial = partial_of(records, RUN_ID, lost[0].seq)
            second_partial = partial_of(records, RUN_ID, lost[1].seq, after_seq=lost[0].seq)
            assert 0 < len(first_partial) < len(SLOW_TEXT) and 0 < len(second_partial) < len(SLOW_TEXT)
            expected = [
                tool_line,
                shown(first_partial + RESUMED_MARKER),
                shown(second_partial + RESUMED_MARKER),
                shown(ANSWER),
            ]
            await until(
                lambda: tg.texts(CHAT) == expected and not rig.delivery.streams.all(),
                60,
                "both marked partials and the answer",
            )
            await asyncio.sleep(1.0)  # a resume from a stale checkpoint would stream meanwhile
            records = await read_to_end(rig.bootstrap, rig.events_topic)

    # The run's events are numbered once: no seq of a killed attempt is used again.
    seqs = seqs_of(records, RUN_ID)
    assert len(seqs) == len(set(seqs)), sorted(seqs)
    assert lost[0].seq < lost[1].seq < done.seq
    assert [e for e in endings(records) if e.root_run_id == RUN_ID] == [*lost, done]
    # Shown whole and once: the tool's line, the two marked partials and the answer, each sent once.
    assert tg.texts(CHAT) == expected
    assert sum(call.status == 200 for call in tg.calls_to(CHAT, "sendMessage")) == 4
    # The first model call once; the killed one asked again, with the very same memory, by each resume.
    assert fake.request_count == 4, [r.messages for r in fake.requests]
    assert fake.requests[3].messages == fake.requests[2].messages == fake.requests[1].messages
    assert fake.requests[0].messages != fake.requests[1].messages
