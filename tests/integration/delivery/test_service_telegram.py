"""delivery as a service on the real broker, delivering to a fake Telegram: the invariant
(every finished run's visible text equals its answer, once), ledger rows in the database
and their receipts on `deliveries`."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from rich.console import Console
from sqlalchemy import select

from agentstream.config import Settings, TextFormat
from agentstream.contracts import (
    DeliveryReceipt,
    EventBase,
    MessageDelta,
    ReplyTarget,
    RunFinished,
    RunStarted,
    SegmentBreak,
    ToolCall,
)
from agentstream.db import create_engine, session_factory
from agentstream.db.models_delivery import DeliveryLedger
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery import bootstrap
from agentstream_delivery.adapters.telegram import CAPABILITIES as TELEGRAM
from agentstream_delivery.formatting import render
from agentstream_delivery.ledger import sha256
from agentstream_delivery.render import TOOL_LINE_PREFIX
from agentstream_delivery.splitting import split_text
from agentstream_testing.fake_platforms import FakeTelegram

pytestmark = pytest.mark.integration

FIRST = "Let me look that up."
LONG = ("A long paragraph of the final answer, written to cross Telegram's limit. " * 30 + "\n\n") * 3


def run_events(run: str, chat: str) -> list[EventBase]:
    ids = {"run_id": run, "root_run_id": run, "conversation_key": f"telegram:{chat}"}
    seq = iter(range(1, 10_000))
    events: list[EventBase] = [
        RunStarted(
            **ids,
            seq=next(seq),
            assistant_id="a",
            connector_id="demo",
            reply_target=ReplyTarget(platform="telegram", chat_id=chat),
        )
    ]
    events += [MessageDelta(**ids, seq=next(seq), message_id="m1", text=FIRST[i : i + 5]) for i in range(0, 20, 5)]
    events += [
        ToolCall(**ids, seq=next(seq), call_id="c1", tool="search", arguments="{}"),
        SegmentBreak(**ids, seq=next(seq)),
    ]
    events += [
        MessageDelta(**ids, seq=next(seq), message_id="m2", text=LONG[i : i + 400]) for i in range(0, len(LONG), 400)
    ]
    events.append(RunFinished(**ids, seq=next(seq), status="completed", text=LONG))
    return events


async def test_runs_to_telegram_keep_the_invariant_with_ledger_and_receipts(
    settings_factory: Callable[..., Settings], topics_created: str, monkeypatch: pytest.MonkeyPatch
):
    async with FakeTelegram() as tg:
        monkeypatch.setenv("SVC_TG_TOKEN", tg.token)
        settings = settings_factory(
            platforms={
                "telegram": {"api_url": tg.url, "token_env": "SVC_TG_TOKEN", "edit_interval": 0.3, "chat_interval": 0.2}
            }
        )
        svc = bootstrap(settings, console=Console(file=io.StringIO()))
        done: list[str] = []
        both_done = asyncio.Event()

        def on_finished(ev: RunFinished) -> None:
            done.append(ev.root_run_id)
            if len(done) == 2:
                both_done.set()

        svc.finished_listeners.append(on_finished)
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
        async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
            await producer.start()
            try:
                for run, chat in (("ra", "-71"), ("rb", "-72")):
                    for ev in run_events(run, chat):
                        await producer.send_and_wait(
                            f"{settings.kafka.topic_prefix}events", ev.to_json(), key=ev.conversation_key.encode()
                        )
                        await asyncio.sleep(0.02)
            finally:
                await producer.stop()
            await asyncio.wait_for(both_done.wait(), 30)
            # both streams finished: the commit point moves to the end of every partition
            await asyncio.sleep(1.5)
            committed = await committed_offsets(settings)
            assert committed and committed == await end_offsets(settings)

    for chat in ("-71", "-72"):
        texts = tg.texts(chat)
        assert texts[0] == FIRST and texts[1] == TOOL_LINE_PREFIX + "search …"
        answer_msgs = texts[2:]
        # split between paragraphs, then exactly once, each part rendered as Telegram HTML
        assert len(answer_msgs) >= 2 and "\n\n".join(answer_msgs) == render(LONG, TextFormat.TELEGRAM_HTML)
        assert len(tg.calls_to(chat, "sendMessage")) == len(texts)  # no message posted twice

    engine = create_engine(settings.database.url)
    try:
        async with session_factory(engine)() as session:
            rows = (
                await session.scalars(
                    select(DeliveryLedger).where(DeliveryLedger.root_run_id == "ra").order_by(DeliveryLedger.segment)
                )
            ).all()
    finally:
        await engine.dispose()
    assert [r.state for r in rows] == ["sent"] * len(tg.texts("-71"))
    assert [r.platform_message_id for r in rows] == [m.message_id for m in tg.messages("-71")]
    # Each row holds the hash of the text delivery put there (before rendering); the chat shows its rendering.
    sources = [FIRST, TOOL_LINE_PREFIX + "search …", *split_text(LONG, 4096, TELEGRAM.length())]
    assert all(
        r.final and r.text_sha256 == sha256(source) and m.text == render(source, TextFormat.TELEGRAM_HTML)
        for r, m, source in zip(rows, tg.messages("-71"), sources, strict=True)
    )

    consumer = AIOKafkaConsumer(
        f"{settings.kafka.topic_prefix}deliveries",
        bootstrap_servers=kafka_of(settings),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        batch = await consumer.getmany(timeout_ms=5000, max_records=10_000)
    finally:
        await consumer.stop()
    receipts = [DeliveryReceipt.model_validate_json(r.value) for recs in batch.values() for r in recs]
    states = [r.state for r in receipts if r.root_run_id == "ra" and r.segment == 0]
    assert states[:3] == ["pending", "sending", "sent"] and states[-1] == "sent"


def kafka_of(settings: Settings) -> str:
    return settings.kafka.bootstrap_servers


async def committed_offsets(settings: Settings) -> dict[int, int]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        enable_auto_commit=False,
        group_id=f"{settings.kafka.topic_prefix}delivery",
    )
    await consumer.start()  # not subscribed: it only reads the group's committed offsets, never joins
    try:
        topic = f"{settings.kafka.topic_prefix}events"
        points = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(settings.kafka.partitions)}
    finally:
        await consumer.stop()
    return {p: off for p, off in points.items() if off is not None and off > 0}


async def end_offsets(settings: Settings) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers)
    await consumer.start()
    try:
        topic = f"{settings.kafka.topic_prefix}events"
        tps = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return {tp.partition: off for tp, off in ends.items() if off > 0}
