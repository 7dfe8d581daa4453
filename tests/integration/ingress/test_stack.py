"""Commands and routing against the whole in-process stack (ingress + runner + persistence + …).

/stop ends a streaming run `interrupted` within 500 ms of being produced; /resume continues
the interrupted run; /new starts a new, empty history; a routed profile's assistant answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from sqlalchemy import select

from agentstream.contracts import InboundMessage, MessageDelta, RunEvent, RunEventAdapter, RunFinished, RunStarted, User
from agentstream.db import Message, Run, create_engine, session_factory
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_testing.kafka import SEEK_TO_BEGINNING

LONG = " ".join(f"word{i}" for i in range(120))  # the scripted model echoes it, one token per 30 ms


class Tail:
    """Every event of the test's `events` topic, from the start, collected in the background."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=10,
            auto_offset_reset=SEEK_TO_BEGINNING,
        )
        self.topic = topic
        self.events: list[RunEvent] = []
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Tail:
        await self.consumer.start()
        await self.consumer._client.force_metadata_update()  # noqa: SLF001
        tps = [TopicPartition(self.topic, p) for p in sorted(self.consumer.partitions_for_topic(self.topic) or [])]
        self.consumer.assign(tps)
        await self.consumer.seek_to_beginning(*tps)
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=50)
            for records in batch.values():
                self.events.extend(RunEventAdapter.validate_json(r.value) for r in records)
            if batch:
                self.changed.set()

    async def wait(self, pick: Callable[[RunEvent], bool], timeout: float = 30) -> RunEvent:
        async with asyncio.timeout(timeout):
            while True:
                found = next((e for e in self.events if pick(e)), None)
                if found is not None:
                    return found
                self.changed.clear()
                await self.changed.wait()

    async def __aexit__(self, *exc: object) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.consumer.stop()


def msg(chat: str, text: str, **extra) -> InboundMessage:  # type: ignore[no-untyped-def]
    return InboundMessage(
        id=str(uuid.uuid4()), platform="memory", chat_id=chat, user=User(id="u-1"), text=text, **extra
    )


async def poll_run(url: str, run_id: str, timeout: float = 30) -> Run:
    engine = create_engine(url)
    try:
        async with asyncio.timeout(timeout):
            while True:
                async with session_factory(engine)() as s:
                    row = await s.get(Run, run_id)
                if row is not None:
                    return row
                await asyncio.sleep(0.1)
    finally:
        await engine.dispose()


async def session_messages(url: str, session_id: str) -> list[Message]:
    engine = create_engine(url)
    try:
        async with session_factory(engine)() as s:
            return list((await s.scalars(select(Message).where(Message.session_id == session_id))).all())
    finally:
        await engine.dispose()


async def test_stop_resume_new_and_routes(settings_factory, tmp_path: Path):
    assistants = tmp_path / "assistants"
    assistants.mkdir()
    (assistants / "helper.yaml").write_text("id: helper\nname: Helper\n", encoding="utf-8")
    settings = settings_factory(
        connectors=[{"id": "demo", "type": "scripted", "token_delay_ms": 30}],
        assistants_dir=str(assistants),
        profiles={"help": {"assistant": "helper"}},
        routes=[{"platform": "memory", "chat": "routed", "profile": "help"}],
    )
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        kafka, topics = stack.settings.kafka, stack.services["ingress"].topics
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        await producer.start()

        async def send(m: InboundMessage) -> None:
            await producer.send_and_wait(topics.inbound, m.model_dump_json().encode(), key=m.conversation_key.encode())

        try:
            async with Tail(kafka.bootstrap_servers, topics.events) as tail:
                # a routed profile's assistant answers
                routed = msg("routed", "hi there")
                await send(routed)
                started = await tail.wait(lambda e: isinstance(e, RunStarted) and e.reply_target.chat_id == "routed")
                assert started.assistant_id == "helper"
                done = await tail.wait(lambda e: isinstance(e, RunFinished) and e.root_run_id == started.root_run_id)
                assert done.status == "completed"

                # /stop during a streaming run: the run ends interrupted, its text cut where the stop
                # landed (a part of the answer, not all of it)
                long = msg("c1", LONG)
                await send(long)
                first = await tail.wait(lambda e: isinstance(e, MessageDelta) and e.conversation_key == "memory:c1")
                await send(msg("c1", "/stop"))
                fin = await tail.wait(lambda e: isinstance(e, RunFinished) and e.root_run_id == first.root_run_id)
                assert fin.status == "interrupted"
                streamed = "".join(
                    e.text
                    for e in tail.events[: tail.events.index(fin)]
                    if isinstance(e, MessageDelta) and e.root_run_id == first.root_run_id
                )
                assert streamed and LONG.split()[-1] not in streamed, streamed  # cut before the end
                interrupted = await poll_run(stack.settings.database.url, first.root_run_id)
                assert interrupted.status == "interrupted"

                # /resume continues the interrupted run to the end
                await send(msg("c1", "/resume"))
                resumed = await tail.wait(
                    lambda e: (
                        isinstance(e, RunFinished) and e.conversation_key == "memory:c1" and e.status == "completed"
                    ),
                    timeout=60,
                )
                assert resumed.text.endswith(LONG.split()[-1])
                assert LONG in resumed.text

                # /new: the next run has a new, empty session
                old = await tail.wait(lambda e: isinstance(e, RunStarted) and e.root_run_id == first.root_run_id)
                await send(msg("c1", "/new"))
                await asyncio.sleep(0.5)
                after = msg("c1", "fresh start")
                await send(after)
                new = await tail.wait(
                    lambda e: (
                        isinstance(e, RunStarted)
                        and e.conversation_key == "memory:c1"
                        and "fresh start" in " ".join(m.content for m in e.input)
                    )
                )
                assert new.session_id and new.session_id != old.session_id
                await tail.wait(lambda e: isinstance(e, RunFinished) and e.root_run_id == new.root_run_id)
                await poll_run(stack.settings.database.url, new.root_run_id)
                rows = await session_messages(stack.settings.database.url, new.session_id)
                assert {r.root_run_id for r in rows} == {new.root_run_id}  # nothing from before /new
        finally:
            await producer.stop()
