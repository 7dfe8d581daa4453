"""The stream task (timer, adapter calls) and the service's routing, without a broker."""

from __future__ import annotations

import asyncio
import io
from dataclasses import replace

import structlog
from rich.console import Console

from agentstream.config import load_settings
from agentstream.contracts import (
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
    ReplyTarget,
    RunFinished,
    RunStarted,
    SegmentBreak,
)
from agentstream_delivery import DeliveryService, bootstrap
from agentstream_delivery.adapters import MemoryAdapter
from agentstream_delivery.ledger import MemoryLedger
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, TextDelta
from agentstream_delivery.stream_model import StreamState

TARGET = ReplyTarget(platform="memory", chat_id="c1")


def actor(adapter: MemoryAdapter, interval: float) -> StreamActor:
    adapter.capabilities = replace(adapter.capabilities, edit_interval=interval)
    a = StreamActor(StreamKey.of("r1", TARGET), TARGET, adapter, structlog.get_logger("test"))
    a.start()
    return a


async def test_held_back_frame_is_flushed_by_the_stream_timer():
    memory = MemoryAdapter()
    a = actor(memory, interval=0.2)
    a.feed(TextDelta("m1", "Hello"))
    a.feed(TextDelta("m1", " world"))  # inside the interval: held back
    await memory.wait_for("c1", lambda ms: len(ms) == 1)
    assert memory.messages("c1")[0].text == "Hello ▉"
    # no more input arrives; the timer must still put the last frame out
    msgs = await memory.wait_for("c1", lambda ms: ms[0].edits == 1, timeout=2)
    assert msgs[0].text == "Hello world ▉"
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    assert a.state is StreamState.DELIVERED
    [msg] = memory.messages("c1")
    assert msg.text == "Hello world" and msg.final
    assert msg.history == ["Hello ▉", "Hello world ▉", "Hello world"]


async def test_failed_send_does_not_lose_the_final_text():
    memory = MemoryAdapter()

    class FlakySend(MemoryAdapter):
        calls = 0

        async def send(self, target: ReplyTarget, text: str, *, final: bool = False) -> str:
            FlakySend.calls += 1
            if FlakySend.calls == 1:
                raise ConnectionError("platform down")
            return await memory.send(target, text, final=final)

    a = actor(FlakySend(), interval=0.01)
    a.feed(TextDelta("m1", "Hello world"))
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    assert [(m.text, m.final) for m in memory.messages("c1")] == [("Hello world", True)]


# -- service routing (handle() without Kafka) ---------------------------------------------
def ids(seq: int, run_id: str = "r1") -> dict[str, object]:
    return {"run_id": run_id, "root_run_id": "r1", "conversation_key": "memory:c1", "seq": seq}


def started(platform: str = "memory") -> RunStarted:
    return RunStarted(
        **ids(1), assistant_id="a", connector_id="demo", reply_target=ReplyTarget(platform=platform, chat_id="c1")
    )


def service(**overrides: object) -> DeliveryService:
    return bootstrap(load_settings(**overrides), console=Console(file=io.StringIO()), ledger=MemoryLedger())


async def test_service_streams_segments_and_calls_listeners_after_final_text():
    svc = service()
    seen: list[tuple[str, list[str]]] = []

    async def on_finished(ev: RunFinished) -> None:
        seen.append((ev.root_run_id, [m.text for m in svc.memory.messages("c1")]))

    svc.finished_listeners.append(on_finished)
    for ev in (
        started(),
        MessageStarted(**ids(2), message_id="m1"),
        MessageDelta(**ids(3), message_id="m1", text="Let me "),
        MessageDelta(**ids(4), message_id="m1", text="secret", kind="thinking"),
        MessageDelta(**ids(5), message_id="m1", text="compute."),
        SegmentBreak(**ids(6)),
        MessageDelta(**ids(7), message_id="m2", text="It is 42."),
        MessageCompleted(**ids(8), message_id="m2", text="It is 42."),
        RunFinished(**ids(9), status="completed", text="It is 42."),
    ):
        await svc.handle(ev)
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert seen == [("r1", ["Let me compute.", "It is 42."])]  # listener ran after the final edit
    assert all(m.final for m in svc.memory.messages("c1"))
    assert svc.streams.all() == []  # closed and forgotten


async def test_events_without_run_started_are_ignored():
    svc = service()
    await svc.handle(MessageDelta(**ids(3), message_id="m1", text="orphan text"))
    await svc.handle(RunFinished(**ids(4), status="completed", text="orphan text"))
    await asyncio.sleep(0.05)
    assert svc.memory.messages("c1") == []


async def test_notice_is_a_standalone_message():
    svc = service()
    await svc.handle(Notice(**ids(0), text="Your message could not be processed", reply_target=TARGET))
    [msg] = await svc.memory.wait_for_final("c1", timeout=2)
    assert msg.text == "Your message could not be processed" and msg.final and msg.edits == 0


async def test_platform_without_adapter_is_dropped_and_disabled_platform_too():
    svc = service(platforms={"memory": {"enabled": False}})
    await svc.handle(started("memory"))
    await svc.handle(started("telegram"))
    assert svc.streams.all() == []


async def test_edit_interval_from_settings_overrides_adapter_default():
    svc = service(platforms={"memory": {"edit_interval": 3.5}})
    await svc.handle(started())
    [a] = svc.streams.all()
    assert a.model.capabilities.edit_interval == 3.5
    await svc.streams.cancel_all()
