"""`kill -9` of agent-runner after it started a run and before its group committed the StartRun.

The runner's `runs` group auto-commits; a runner killed inside that window leaves the StartRun to be
read again by the runner that takes the partition. That run already streamed (the user saw part of
its answer) and spent a model call: started afresh it would pay that call twice and number its
events from 1 again, below what delivery showed and below its `runner_lost` ending, so delivery would
drop the answer as stale. The restarted runner must instead leave the StartRun alone and continue the
run from its checkpoint (docs/decisions.md § Orphaned runs), whether it comes back at once (its
orphan scan ends the run) or after persistence's watchdog has ended and stored it.

The first runner is `tests.chaos.runner_child` (its auto-commit made rare, so the kill always lands
inside the window; the test checks the group committed nothing); the second is `agentstream serve`.
Persistence, tool-executor and delivery (against a fake Telegram) run in this process
(tests/chaos/runner_rig.py). Asserted:
the chat shows the marked partial and the answer, each once; the fake model saw the first turn once
and the killed turn again with the same memory; no event seq of the run repeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest

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
    endings,
    partial_of,
    previewing,
    seqs_of,
    shown,
    until,
)

pytestmark = pytest.mark.chaos

CHAT = "-7300"  # a group chat: the preview is an edited message
RUN_ID = "run-uncommitted-1"
ANSWER = "It is 42."


def run_row_stored(db: Path) -> bool:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (RUN_ID,)).fetchone() is not None


@pytest.mark.parametrize("restart", ["at_once", "after_watchdog"])
async def test_a_start_read_again_after_the_kill_continues_the_run_instead_of_starting_it_afresh(
    kafka_bootstrap, topic_prefix, tmp_path, restart
):
    async with FakeOpenAI() as fake, FakeTelegram() as tg:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])  # completes before the kill
        fake.add_turn(text=SLOW_TEXT, token_delay_s=SLOW_TOKEN_S)  # the kill lands in here
        fake.add_turn(text=ANSWER)  # what the continued run gets
        # At once: the watchdog (30 s) is too slow to matter, the restarted runner's orphan scan ends
        # the run. After the watchdog: the run has ended `runner_lost` and been stored when it comes back.
        stale_after_s = 30.0 if restart == "at_once" else 2.0
        resume = {"auto": True, "stale_after_s": stale_after_s, "watchdog_interval_s": 0.2, "max_attempts": 1}
        async with RunnerRig(
            kafka_bootstrap, topic_prefix, tmp_path, fake, resume=resume, tg=tg, in_process=WITH_DELIVERY
        ) as rig:
            first = rig.runner("first", module="tests.chaos.runner_child")
            second = rig.runner("second")
            start = StartRun(
                run_id=RUN_ID,
                conversation_key=f"telegram:{CHAT}",
                assistant_id="default",
                user=User(id="u1"),
                text="what is 6*7?",
                reply_target=ReplyTarget(platform="telegram", chat_id=CHAT),
            )
            await rig.start(first)
            await rig.send(start, queued=True)  # with the run.queued ingress writes beside the StartRun
            # The tool's status line, then the answer's preview, edited at least once: mid-answer.
            await until(lambda: previewing(tg.messages(CHAT), 1), 60, "a preview")
            first.kill9()
            tool_line = tg.texts(CHAT)[0]
            group = consumer_group(rig.settings.kafka, "agent-runner")
            committed = await committed_offsets(rig.bootstrap, group, rig.runs_topic)
            assert all(offset is None for offset in committed.values()), committed  # inside the window

            if restart == "after_watchdog":
                await read_until(rig.bootstrap, rig.events_topic, lambda rs: len(endings(rs)) >= 1, timeout=30)
                # persistence stores the ending (it writes the run's row then): the start finds it stored
                await until(lambda: run_row_stored(rig.db_path), 30, "the ended run stored")
            await second.start()
            records = await read_until(
                rig.bootstrap,
                rig.events_topic,
                lambda rs: any(e.status is RunStatus.COMPLETED for e in endings(rs)),
                timeout=90,
            )
            lost, done = endings(records)
            assert (lost.status, lost.reason) == (RunStatus.FAILED, "runner_lost")
            assert (done.status, done.text, done.root_run_id) == (RunStatus.COMPLETED, ANSWER, RUN_ID)
            assert done.seq > lost.seq
            partial = partial_of(records, RUN_ID, lost.seq)
            assert 0 < len(partial) < len(SLOW_TEXT), partial
            expected = [tool_line, shown(partial + RESUMED_MARKER), shown(ANSWER)]
            await until(
                lambda: tg.texts(CHAT) == expected and not rig.delivery.streams.all(),
                60,
                "the partial and the answer",
            )
            await asyncio.sleep(1.0)  # anything started afresh would stream meanwhile
            records = await read_to_end(rig.bootstrap, rig.events_topic)

    # Shown whole and once: the tool's line, the marked partial and the answer, each sent once.
    assert tg.texts(CHAT) == expected
    assert sum(call.status == 200 for call in tg.calls_to(CHAT, "sendMessage")) == 3
    # The run's events are numbered once: no seq of the first attempt is used again.
    seqs = seqs_of(records, RUN_ID)
    assert len(seqs) == len(set(seqs)), sorted(seqs)
    assert [e for e in endings(records) if e.root_run_id == RUN_ID] == [lost, done]
    # The first model call once; the killed one asked again with the very same memory (after the tool step).
    assert fake.request_count == 3, [r.messages for r in fake.requests]
    assert fake.requests[2].messages == fake.requests[1].messages
    assert fake.requests[0].messages != fake.requests[1].messages
