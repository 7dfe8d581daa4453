"""The service's routing without a broker: streams opened and closed by run events, notices, stale runs."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from agentstream.config import load_settings
from agentstream.contracts import (
    FinishReason,
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
from agentstream_delivery.ledger import MemoryLedger
from agentstream_delivery.render import ENDING_TEXTS, RESUMED_MARKER

TARGET = ReplyTarget(platform="memory", chat_id="c1")


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


async def test_the_fixed_texts_a_platform_is_configured_with_are_the_ones_its_chats_get():
    german = {"stopped": "⏹ gestoppt", "runner_lost": "⚠️ Abgebrochen.", "resumed": "⤵ Unten fortgesetzt."}
    svc = service(platforms={"memory": {"texts": german}})
    start = {"assistant_id": "a", "connector_id": "demo", "reply_target": TARGET}
    await svc.handle(RunStarted(**_ids("s", 1), **start))
    await svc.handle(MessageDelta(**_ids("s", 2), message_id="m1", text="Halb"))
    await svc.handle(RunFinished(**_ids("s", 3), status="interrupted", reason="user"))
    await svc.handle(RunStarted(**_ids("r", 1), **start))
    await svc.handle(MessageDelta(**_ids("r", 2), message_id="m1", text="Erster Versuch"))
    await svc.handle(RunFinished(**_ids("r", 3), status="failed", reason="runner_lost"))
    await svc.handle(RunStarted(**_ids("r", 4), **start))
    await svc.handle(RunFinished(**_ids("r", 5), status="completed", text="Fertig"))
    msgs = await svc.memory.wait_for(
        "c1", lambda ms: len(ms) == 3 and all(m.final for m in ms) and "Unten" in ms[1].text, timeout=3
    )
    assert msgs[0].text == "Halb ⏹ gestoppt"
    assert msgs[1].history[-2:] == ["Erster Versuch\n\n⚠️ Abgebrochen.", "Erster Versuch\n\n⤵ Unten fortgesetzt."]
    assert msgs[2].text == "Fertig"


# -- stale runs in the service ------------------------------------------------------------------
def _ids(run: str, seq: int) -> dict[str, object]:
    return {"run_id": run, "root_run_id": run, "conversation_key": "memory:c1", "seq": seq}


async def test_newer_run_stops_the_older_stream_and_late_events_are_dropped():
    svc = service()
    for run in ("old", "new"):
        await svc.handle(RunStarted(**_ids(run, 1), assistant_id="a", connector_id="demo", reply_target=TARGET))
        await svc.handle(MessageDelta(**_ids(run, 2), message_id=f"{run}-m", text=f"{run} answer text"))
        await asyncio.sleep(0.05)
    await svc.handle(MessageDelta(**_ids("old", 3), message_id="old-m", text=" LATE"))
    await svc.handle(RunFinished(**_ids("new", 3), status="interrupted"))  # /stop
    await svc.handle(MessageDelta(**_ids("new", 4), message_id="new-m", text=" LATE"))
    await svc.memory.wait_for_final("c1", count=2, timeout=3)
    await asyncio.sleep(0.1)
    texts = [m.text for m in svc.memory.messages("c1")]
    assert texts == ["old answer text ⏹ stopped", "new answer text ⏹ stopped"]
    assert svc.streams.all() == []


async def test_resumed_run_streams_below_what_the_first_attempt_showed():
    svc = service()
    start = {"assistant_id": "a", "connector_id": "demo", "reply_target": TARGET}
    await svc.handle(RunStarted(**_ids("r", 1), **start))
    await svc.handle(MessageDelta(**_ids("r", 2), message_id="m1", text="First attempt"))
    await svc.handle(RunFinished(**_ids("r", 3), status="failed", reason="runner_lost"))
    await svc.handle(MessageDelta(**_ids("r", 3), message_id="m1", text=" stale"))  # a late event: dropped
    await svc.handle(RunStarted(**_ids("r", 4), **start))  # resumed: same root run, later seq
    await svc.handle(MessageDelta(**_ids("r", 5), message_id="m2", text="Resumed answer"))
    await svc.handle(RunFinished(**_ids("r", 6), status="completed", text="Resumed answer"))
    msgs = await svc.memory.wait_for(
        "c1", lambda ms: len(ms) == 2 and all(m.final for m in ms) and ms[0].text.endswith(RESUMED_MARKER), timeout=3
    )
    # The partial attempt ended visibly, then was re-marked; the answer is one message below it.
    assert msgs[0].history[-2:] == [
        "First attempt\n\n" + ENDING_TEXTS[FinishReason.RUNNER_LOST],
        "First attempt" + RESUMED_MARKER,
    ]
    assert msgs[1].text == "Resumed answer"


async def test_offsets_are_committed_past_a_stream_only_once_it_closed():
    svc = service()
    points = svc.events.points
    await svc.handle(started(), origin=(0, 5))
    for offset in range(5, 9):
        points.read(0, offset)
    assert points.due() == {0: 5}  # the open stream holds the commit at its run.started
    await svc.handle(RunFinished(**ids(9), status="completed", text="done"), origin=(0, 9))
    points.read(0, 9)
    [msg] = await svc.memory.wait_for_final("c1", timeout=3)
    for _ in range(100):
        if points.due() == {0: 10}:
            break
        await asyncio.sleep(0.01)
    assert msg.text == "done" and points.due() == {0: 10}


async def test_a_replay_streams_beside_the_chats_current_run_and_is_not_relayed():
    svc = service()
    forwarded: list[object] = []
    svc.relay.forwards = lambda source, event: forwarded.append(event) or []  # type: ignore[method-assign]
    start = {"assistant_id": "a", "connector_id": "demo", "reply_target": TARGET}
    await svc.handle(RunStarted(**_ids("live", 1), **start))
    await svc.handle(MessageDelta(**_ids("live", 2), message_id="live-m", text="live answer"))
    await svc.handle(RunStarted(**_ids("replay", 1), **start, replay_of="orig"))
    await svc.handle(MessageCompleted(**_ids("replay", 2), message_id="m", text="replayed answer"))
    await svc.handle(RunFinished(**_ids("replay", 3), status="completed", text="replayed answer"))
    await svc.handle(RunFinished(**_ids("live", 3), status="completed", text="live answer"))
    await svc.memory.wait_for_final("c1", count=2, timeout=3)
    await asyncio.sleep(0.1)
    assert sorted(m.text for m in svc.memory.messages("c1")) == ["live answer", "replayed answer"]  # nothing stopped
    assert [e.root_run_id for e in forwarded] == ["live"]  # type: ignore[attr-defined]
