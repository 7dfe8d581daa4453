"""ingress's crash window, without the crash's timing: a batch's output acked, its dedupe rows
never written, the batch read again (docs/decisions.md, "Dedupe rows are written once the
batch's output is acked"). The whole in-process stack answers it once: one run, one answer on
the platform, one stored run — whether the repeat comes while the run is under way or after
it was stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest
from aiokafka import TopicPartition
from sqlalchemy import func, select

from agentstream.contracts import InboundMessage, Notice, RunCommandAdapter, RunQueued, RunStarted, StartRun
from agentstream.contracts.inbound import DedupeKey
from agentstream.db import Message, Run, create_engine, session_factory
from agentstream.kafka.idle import DOORBELL
from agentstream_ingress.app import IngressService
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_testing.kafka import produce_raw, read_until
from tests.integration.ingress.test_stack import Tail, msg, poll_run


class CrashAfterAcks:
    """ingress's dedupe-row write, replaced once by what a kill -9 right before it leaves: the
    batch's output in Kafka, no dedupe rows, the batch's offset not committed, so the next
    consumer reads the batch again (here: this consumer, sought back to the batch's record)."""

    def __init__(self, ingress: IngressService, before_reread: Callable[[], Awaitable[None]]) -> None:
        self.ingress = ingress
        self.record_sightings = ingress.ports.record_sightings
        self.before_reread = before_reread
        self.at: TopicPartition | None = None
        self.offset = 0
        self.located = asyncio.Event()  # the record's position is known (the ack may come first)
        self.crashed = asyncio.Event()

    def record_at(self, topic: str, partition: int, offset: int) -> None:
        self.at, self.offset = TopicPartition(topic, partition), offset
        self.located.set()

    async def __call__(self, claims: Sequence[DedupeKey]) -> None:
        if self.crashed.is_set():
            await self.record_sightings(claims)
            return
        self.crashed.set()
        self.ingress.ports.release_sightings(claims)  # in memory only: gone with the process
        await self.before_reread()
        await self.located.wait()
        assert self.at is not None
        self.ingress.inbound.consumer().seek(self.at, self.offset)
        DOORBELL.ring(self.at.topic)  # an idle consumer is paused: wake it up


async def stored_in(url: str, conversation_key: str) -> int:
    """Runs rows of the conversation."""
    engine = create_engine(url)
    try:
        async with session_factory(engine)() as s:
            count = await s.scalar(
                select(func.count()).select_from(Run).where(Run.conversation_key == conversation_key)
            )
            return int(count or 0)
    finally:
        await engine.dispose()


async def stored(url: str, run_id: str) -> tuple[int, int]:
    """(runs rows, message rows) of the run."""
    engine = create_engine(url)
    try:
        async with session_factory(engine)() as s:
            runs = await s.scalar(select(func.count()).select_from(Run).where(Run.root_run_id == run_id))
            messages = await s.scalar(select(func.count()).select_from(Message).where(Message.root_run_id == run_id))
            return int(runs or 0), int(messages or 0)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("repeat", ["while_running", "after_stored"])
async def test_a_batch_read_again_after_its_output_was_acked_answers_once(settings_factory, repeat: str):
    settings = settings_factory(connectors=[{"id": "demo", "type": "scripted", "token_delay_ms": 20}])
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        ingress = stack.services["ingress"]
        assert isinstance(ingress, IngressService)
        memory = stack.services["delivery"].memory  # type: ignore[attr-defined]
        kafka, topics, url = stack.settings.kafka, ingress.topics, stack.settings.database.url
        message: InboundMessage = msg("repeat", " ".join(f"word{i}" for i in range(30)))

        async def before_reread() -> None:
            if repeat == "after_stored":  # the run finished, was shown and stored before ingress came back
                await memory.wait_for_final("repeat", timeout=60)
                async with asyncio.timeout(30):
                    while True:  # persistence's write follows delivery's final
                        if await stored_in(url, message.conversation_key):
                            break
                        await asyncio.sleep(0.1)

        crash = CrashAfterAcks(ingress, before_reread)
        ingress.ports.record_sightings = crash  # type: ignore[method-assign]
        async with Tail(kafka.bootstrap_servers, topics.events) as tail:
            sent = await produce_raw(
                kafka.bootstrap_servers,
                topics.inbound,
                message.model_dump_json().encode(),
                key=message.conversation_key.encode(),
            )
            crash.record_at(sent.topic, sent.partition, sent.offset)

            runs = await read_until(kafka.bootstrap_servers, topics.runs, lambda rs: len(rs) >= 2, timeout=60)
            starts = [RunCommandAdapter.validate_json(r.value) for r in runs]
            assert all(isinstance(s, StartRun) for s in starts) and len(starts) == 2  # the batch's output twice
            run_id = starts[0].run_id  # type: ignore[union-attr]
            await memory.wait_for_final("repeat", timeout=60)
            await poll_run(url, run_id)
            await asyncio.sleep(1.5)  # a second run, answer or row would land now
            shown = memory.messages("repeat")
            assert len(shown) == 1 and shown[0].final and "word29" in shown[0].text, shown
            assert len([e for e in tail.events if isinstance(e, RunStarted)]) == 1
            assert await stored(url, run_id) == (1, 2)  # one run; the question and the answer, once each
            # ...because the repeat carries the same ids, so it is recognised downstream
            queued = [e for e in tail.events if isinstance(e, RunQueued)]
            assert len(queued) == 2 and queued[0].id == queued[1].id
            assert starts[0].run_id == starts[1].run_id and starts[0].id == starts[1].id  # type: ignore[union-attr]
        assert (await poll_run(url, run_id)).status == "completed"


async def test_a_notice_of_a_batch_read_again_is_shown_once(settings_factory):
    # a command's reply is a notice outside any run: its id is the inbound record's, and delivery's ledger keeps it once
    settings = settings_factory()
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        ingress = stack.services["ingress"]
        assert isinstance(ingress, IngressService)
        memory = stack.services["delivery"].memory  # type: ignore[attr-defined]
        kafka, topics = stack.settings.kafka, ingress.topics
        message = msg("notice", "/help")

        async def shown_first() -> None:  # the reply is on the platform before ingress comes back
            await memory.wait_for_final("notice", timeout=60)

        crash = CrashAfterAcks(ingress, shown_first)
        ingress.ports.record_sightings = crash  # type: ignore[method-assign]
        async with Tail(kafka.bootstrap_servers, topics.events) as tail:
            sent = await produce_raw(
                kafka.bootstrap_servers,
                topics.inbound,
                message.model_dump_json().encode(),
                key=message.conversation_key.encode(),
            )
            crash.record_at(sent.topic, sent.partition, sent.offset)
            await tail.wait(lambda _: sum(isinstance(e, Notice) for e in tail.events) >= 2, timeout=60)
            await asyncio.sleep(1.0)  # a second platform message would land now
            notices = [e for e in tail.events if isinstance(e, Notice)]
        shown = memory.messages("notice")
        assert len(shown) == 1 and "Commands:" in shown[0].text, shown
        assert len(notices) == 2 and notices[0].id == notices[1].id  # the repeat, recognised by its id
