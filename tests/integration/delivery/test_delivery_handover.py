"""A second delivery joins while the first delivers streams: every stream ends with its exact
final text, once, and a chat message has one writer at a time (docs/delivery.md § Rebalance).

The first delivery's streams of every revoked `events` partition stop before their next
platform call and are forgotten; the partitions' records are read again from the committed
offset by their owner after the rebalance — the second delivery, or the first one again (an
eager rebalance revokes every partition, so the partitions it keeps come back to it) — which
carries on from the ledger.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from rich.console import Console

from agentstream.config import Settings, TextFormat
from agentstream.contracts import EventBase, MessageDelta, ReplyTarget, RunFinished, RunStarted
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery import bootstrap
from agentstream_delivery.app import DeliveryService
from agentstream_delivery.formatting import render
from agentstream_testing.fake_platforms import Failure, FakeTelegram

pytestmark = pytest.mark.integration

CHATS = [f"-90{i}" for i in range(8)]  # groups: previews are messages edited in place
WORDS = [f"word{i} " for i in range(12)]
ANSWER = "".join(WORDS)
BEFORE = 5  # deltas sent before the second delivery joins
# An edit the fake applies and answers only after this long: in flight when the second delivery joins,
# it outlasts the rebalance, so a hand-over that did not wait for it would overlap the new owner's writes.
SLOW_EDIT = Failure(200, {"ok": True, "result": True}, delay_s=12.0, apply=True)


@dataclass(frozen=True)
class PlatformCall:
    member: str
    chat_id: str
    started: float
    ended: float


def record_calls(svc: DeliveryService, member: str, calls: list[PlatformCall]) -> None:
    """Every send and edit of `svc`'s Telegram adapter, with when it left and when it was answered."""
    adapter = svc.adapters["telegram"]
    for method in ("send", "edit"):
        original = getattr(adapter, method)

        async def recorded(target: ReplyTarget, *args: Any, _original: Any = original, **kw: Any) -> Any:
            started = time.monotonic()
            try:
                return await _original(target, *args, **kw)
            finally:
                calls.append(PlatformCall(member, target.chat_id, started, time.monotonic()))

        setattr(adapter, method, recorded)


def run_events(chat: str) -> list[EventBase]:
    ids = {"run_id": f"run{chat}", "root_run_id": f"run{chat}", "conversation_key": f"telegram:{chat}"}
    target = ReplyTarget(platform="telegram", chat_id=chat)
    events: list[EventBase] = [RunStarted(**ids, seq=1, assistant_id="a", connector_id="demo", reply_target=target)]
    events += [MessageDelta(**ids, seq=2 + i, message_id="m1", text=w) for i, w in enumerate(WORDS)]
    events.append(RunFinished(**ids, seq=2 + len(WORDS), status="completed", text=ANSWER))
    return events


def assigned(svc: DeliveryService) -> set[int]:
    consumer = svc.events.consumer()
    return set() if consumer is None else {tp.partition for tp in consumer.assignment()}


async def until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_streams_in_flight_during_a_rebalance_end_whole_with_one_writer(
    settings_factory: Callable[..., Settings], topics_created: str, monkeypatch: pytest.MonkeyPatch
):
    async with FakeTelegram() as tg:
        monkeypatch.setenv("HANDOVER_TG_TOKEN", tg.token)
        settings = settings_factory(
            platforms={
                "telegram": {
                    "api_url": tg.url,
                    "token_env": "HANDOVER_TG_TOKEN",
                    "edit_interval": 0.2,
                    "chat_interval": 0.1,
                    "timeout_s": 20.0,  # longer than SLOW_EDIT
                }
            }
        )
        first = bootstrap(settings, console=Console(file=io.StringIO()))
        second = bootstrap(settings, console=Console(file=io.StringIO()))
        calls: list[PlatformCall] = []
        record_calls(first, "first", calls)
        record_calls(second, "second", calls)
        topic = f"{settings.kafka.topic_prefix}events"
        partition_of: dict[str, int] = {}
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
        await producer.start()
        try:

            async def produce(chat: str, events: list[EventBase]) -> None:
                for ev in events:
                    meta = await producer.send_and_wait(topic, ev.to_json(), key=ev.conversation_key.encode())
                    partition_of[chat] = meta.partition

            async with ServiceHost([first], "127.0.0.1", {first.name: free_port()}):
                await until(lambda: bool(assigned(first)), 30, "the first delivery's assignment")
                for chat in CHATS:
                    await produce(chat, run_events(chat)[: 1 + BEFORE])
                # every stream is in flight on the first delivery: its preview is on the chat
                await until(lambda: all(tg.texts(c) for c in CHATS), 30, "a preview in every chat")
                tg.fail_next("editMessageText", SLOW_EDIT, count=len(CHATS))
                for chat in CHATS:
                    await produce(chat, run_events(chat)[1 + BEFORE : 2 + BEFORE])
                await until(lambda: all(tg.calls_to(c, "editMessageText") for c in CHATS), 30, "an edit in flight")
                async with ServiceHost([second], "127.0.0.1", {second.name: free_port()}):
                    await until(lambda: bool(assigned(first)) and bool(assigned(second)), 60, "the rebalance")
                    kept, moved = assigned(first), assigned(second)
                    for chat in CHATS:
                        await produce(chat, run_events(chat)[2 + BEFORE :])
                    final = render(ANSWER, TextFormat.TELEGRAM_HTML)
                    await until(lambda: all(tg.texts(c) == [final] for c in CHATS), 60, "every final text")
                    await asyncio.sleep(1.0)  # time for a stale stream to write again, were one left
        finally:
            await producer.stop()

    assert kept.isdisjoint(moved)
    moved_chats = [c for c in CHATS if partition_of[c] in moved]
    kept_chats = [c for c in CHATS if partition_of[c] in kept]
    assert moved_chats and kept_chats, f"both members own a chat: {partition_of}, kept {kept}, moved {moved}"
    for chat in CHATS:
        assert tg.texts(chat) == [final]  # the exact final text, and no second message
        assert len(tg.calls_to(chat, "sendMessage")) == 1, chat  # one message posted, by one member
        writes = sorted(tg.calls_to(chat, "sendMessage", "editMessageText"), key=lambda c: c.at)
        # One writer at a time as the platform saw it: each write took effect before the next one
        # arrived (a stream waits for each answer; a write cut off by the hand-over would overlap).
        assert all(a.applied_at is not None and a.applied_at <= b.at for a, b in pairwise(writes)), chat
    for chat in moved_chats:
        by_first = [c for c in calls if c.chat_id == chat and c.member == "first"]
        by_second = [c for c in calls if c.chat_id == chat and c.member == "second"]
        assert by_first and by_second, chat  # the first began the stream, the second ended it
        # one writer at a time: the old owner's last call was answered before the new owner's first left
        assert max(c.ended for c in by_first) <= min(c.started for c in by_second), chat
    for chat in kept_chats:  # back to the first delivery: re-read and ended by it, no stale stream fed
        assert all(c.member == "first" for c in calls if c.chat_id == chat), chat
