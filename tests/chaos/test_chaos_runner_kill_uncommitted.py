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
Persistence, tool-executor and delivery (against a fake Telegram) run in this process. Asserted:
the chat shows the marked partial and the answer, each once; the fake model saw the first turn once
and the killed turn again with the same memory; no event seq of the run repeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentstream.contracts import ReplyTarget, RunQueued, RunStatus, StartRun, User
from agentstream.host import ServiceHost
from agentstream.kafka import create_topics, free_port
from agentstream.kafka.topics import consumer_group
from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery
from agentstream_delivery.render import RESUMED_MARKER
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeTelegram
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import produce_raw, read_to_end, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from tests.chaos.processes import ServiceProcess, service_env
from tests.chaos.test_chaos_runner_kill import SLOW_TEXT
from tests.chaos.test_chaos_runner_lost_endings import TELEGRAM, endings, events, partial_of, shown, until

pytestmark = pytest.mark.chaos

CHAT = "-7300"  # a group chat: the preview is an edited message
RUN_ID = "run-uncommitted-1"
ANSWER = "It is 42."


def run_row_stored(db: Path) -> bool:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (RUN_ID,)).fetchone() is not None


async def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """`group`'s committed offset of each partition of `topic` (None: never committed)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        partitions = sorted(await producer.partitions_for(topic))
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        await consumer.stop()


@pytest.mark.parametrize("restart", ["at_once", "after_watchdog"])
async def test_a_start_read_again_after_the_kill_continues_the_run_instead_of_starting_it_afresh(
    kafka_bootstrap, topic_prefix, tmp_path, monkeypatch, restart
):
    async with FakeOpenAI() as fake, FakeTelegram() as tg:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])  # completes before the kill
        fake.add_turn(text=SLOW_TEXT, token_delay_s=0.25)  # the kill lands in here
        fake.add_turn(text=ANSWER)  # what the continued run gets
        monkeypatch.setenv("CHAOS_TG_TOKEN", tg.token)
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        # At once: the watchdog (30 s) is too slow to matter, the restarted runner's orphan scan ends
        # the run. After the watchdog: the run has ended `runner_lost` and been stored when it comes back.
        stale_after_s = 30.0 if restart == "at_once" else 2.0
        settings = make_test_settings(
            kafka_bootstrap,
            topic_prefix,
            f"sqlite+aiosqlite:///{tmp_path / 'chaos.db'}",
            connectors=connectors,
            default_connector="fake",
            resume={"auto": True, "stale_after_s": stale_after_s, "watchdog_interval_s": 0.2, "max_attempts": 1},
            platforms={"telegram": {**TELEGRAM, "api_url": tg.url, "token_env": "CHAOS_TG_TOKEN"}},
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
        first = ServiceProcess("agent-runner", env, port, tmp_path, "first", module="tests.chaos.runner_child")
        second = ServiceProcess("agent-runner", env, port, tmp_path, "second")
        persistence, tools, delivery = (
            bootstrap_persistence(settings),
            bootstrap_tool_executor(settings),
            bootstrap_delivery(settings),
        )
        start = StartRun(
            run_id=RUN_ID,
            conversation_key=f"telegram:{CHAT}",
            assistant_id="default",
            user=User(id="u1"),
            text="what is 6*7?",
            reply_target=ReplyTarget(platform="telegram", chat_id=CHAT),
        )
        bootstrap, events_topic, runs_topic = (
            settings.kafka.bootstrap_servers,
            f"{topic_prefix}events",
            f"{topic_prefix}runs",
        )
        try:
            host = ServiceHost(
                [persistence, tools, delivery],
                "127.0.0.1",
                {s.name: free_port() for s in (persistence, tools, delivery)},
            )
            try:
                await asyncio.gather(host.start(), first.start())
                queued = RunQueued(
                    run_id=RUN_ID,
                    root_run_id=RUN_ID,
                    conversation_key=start.conversation_key,
                    seq=0,
                    assistant_id="default",
                    reply_target=start.reply_target,
                )  # what ingress writes beside the StartRun
                await produce_raw(bootstrap, events_topic, queued.to_json(), key=start.conversation_key.encode())
                await produce_raw(bootstrap, runs_topic, start.to_json(), key=start.conversation_key.encode())
                # The tool's status line, then the answer's preview, edited at least once: mid-answer.
                await until(lambda: len(tg.messages(CHAT)) == 2 and tg.messages(CHAT)[1].edits >= 1, 60, "a preview")
                first.kill9()
                tool_line = tg.texts(CHAT)[0]
                group = consumer_group(settings.kafka, "agent-runner")
                committed = await committed_offsets(bootstrap, group, runs_topic)
                assert all(offset is None for offset in committed.values()), committed  # inside the window

                if restart == "after_watchdog":
                    await read_until(bootstrap, events_topic, lambda rs: len(endings(rs)) >= 1, timeout=30)
                    # persistence stores the ending (it writes the run's row then): the start finds it stored
                    await until(lambda: run_row_stored(tmp_path / "chaos.db"), 30, "the ended run stored")
                await second.start()
                records = await read_until(
                    bootstrap,
                    events_topic,
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
                    lambda: tg.texts(CHAT) == expected and not delivery.streams.all(), 60, "the partial and the answer"
                )
                await asyncio.sleep(1.0)  # anything started afresh would stream meanwhile
                records = await read_to_end(bootstrap, events_topic)
            finally:
                await host.stop()
        finally:
            first.stop()
            second.stop()

    # Shown whole and once: the tool's line, the marked partial and the answer, each sent once.
    assert tg.texts(CHAT) == expected
    assert sum(call.status == 200 for call in tg.calls_to(CHAT, "sendMessage")) == 3
    # The run's events are numbered once: no seq of the first attempt is used again.
    seqs = [e.seq for e in events(records) if getattr(e, "root_run_id", None) == RUN_ID]
    assert len(seqs) == len(set(seqs)), sorted(seqs)
    assert [e for e in endings(records) if e.root_run_id == RUN_ID] == [lost, done]
    # The first model call once; the killed one asked again with the very same memory (after the tool step).
    assert fake.request_count == 3, [r.messages for r in fake.requests]
    assert fake.requests[2].messages == fake.requests[1].messages
    assert fake.requests[0].messages != fake.requests[1].messages
