"""delivery on the real broker: a hand-written run on `events` is streamed into the memory platform."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from rich.console import Console

from agentstream.config import Settings
from agentstream.contracts import (
    EventBase,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
    ReplyTarget,
    RunFinished,
    RunQueued,
    RunStarted,
    SegmentBreak,
    ToolCall,
    ToolResult,
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery import bootstrap
from agentstream_testing.fixtures import ADMIN_HEADERS

pytestmark = pytest.mark.integration

CHAT = "chat-d"
KEY = f"memory:{CHAT}"
TARGET = ReplyTarget(platform="memory", chat_id=CHAT)
FIRST = "Let me calculate that for you."
ANSWER = "6*7 is **42**. Anything else?"


def ids(seq: int) -> dict[str, object]:
    return {"run_id": "run-d", "root_run_id": "run-d", "conversation_key": KEY, "seq": seq}


def chunks(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def run_events() -> list[EventBase]:
    seq = iter(range(100))
    events: list[EventBase] = [
        RunQueued(**ids(next(seq)), assistant_id="default", reply_target=TARGET, text="calculate 6*7"),
        RunStarted(**ids(next(seq)), assistant_id="default", connector_id="demo", reply_target=TARGET),
        MessageStarted(**ids(next(seq)), message_id="m1"),
    ]
    events += [MessageDelta(**ids(next(seq)), message_id="m1", text=c) for c in chunks(FIRST)]
    events += [
        MessageCompleted(**ids(next(seq)), message_id="m1", text=FIRST),
        ToolCall(**ids(next(seq)), call_id="c1", tool="calculator", arguments='{"expression": "6*7"}'),
        SegmentBreak(**ids(next(seq))),
        ToolResult(**ids(next(seq)), call_id="c1", tool="calculator", ok=True, content="42"),
        MessageStarted(**ids(next(seq)), message_id="m2"),
        MessageDelta(**ids(next(seq)), message_id="m2", text="(thinking about it)", kind="thinking"),
    ]
    events += [MessageDelta(**ids(next(seq)), message_id="m2", text=c) for c in chunks(ANSWER)]
    events += [
        MessageCompleted(**ids(next(seq)), message_id="m2", text=ANSWER),
        RunFinished(**ids(next(seq)), status="completed", text=ANSWER),
    ]
    return events


async def publish(settings: Settings, values: list[bytes], pause: float = 0.0) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(f"{settings.kafka.topic_prefix}events", value, key=KEY.encode())
            await asyncio.sleep(pause)
    finally:
        await producer.stop()


async def test_run_is_streamed_once_per_segment(settings_factory: Callable[..., Settings], topics_created: str):
    settings = settings_factory()
    svc = bootstrap(settings, console=Console(file=io.StringIO()))
    finished: list[str] = []
    svc.finished_listeners.append(lambda ev: finished.append(ev.root_run_id))
    orphan = MessageDelta(
        run_id="ghost", root_run_id="ghost", conversation_key=KEY, seq=3, message_id="x", text="never shown"
    )
    notice = Notice(
        run_id="n1",
        root_run_id="n1",
        conversation_key=KEY,
        seq=0,
        level="error",
        text="Your message could not be processed",
        reply_target=TARGET,
    )
    async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}) as host:
        # The answer's end is held back until its preview is shown, so it really is edited in place: paced
        # only by time (0.01 s an event), a delivery behind at load ~9 read the answer whole and sent it once.
        *streamed, completed, finished_event = run_events()
        await publish(settings, [b"not json", orphan.to_json(), *(e.to_json() for e in streamed)], pause=0.01)
        await svc.memory.wait_for(CHAT, lambda ms: len(ms) == 2 and not ms[1].final, timeout=30)
        await publish(settings, [completed.to_json(), finished_event.to_json()])
        msgs = await svc.memory.wait_for_final(CHAT, count=2, timeout=30)
        await publish(settings, [notice.to_json()])
        msgs = await svc.memory.wait_for_final(CHAT, count=3, timeout=30)

        assert [m.text for m in msgs] == [FIRST, ANSWER, "Your message could not be processed"]
        first, answer, _ = msgs
        assert answer.edits >= 1 and answer.history[0].endswith(" ▉")  # streamed, then edited in place
        assert all(not frame.endswith(" ▉") for frame in (first.text, answer.text))
        assert all("thinking" not in frame for m in msgs for frame in m.history)
        assert len(set(answer.history)) == len(answer.history)  # never the same frame twice
        async with asyncio.timeout(10):  # listeners hear of the run once its stream closed (ledger written)
            while True:
                if finished:
                    break
                await asyncio.sleep(0.05)
        assert finished == ["run-d"]

        async with httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url(svc.name), timeout=5) as http:
            chat = (await http.get(f"/v1/memory/chats/{CHAT}")).json()
            streams = (await http.get("/v1/streams")).json()
        assert chat["chat_id"] == CHAT
        assert [(m["text"], m["sends"]) for m in chat["messages"]] == [
            (FIRST, 1),
            (ANSWER, 1),
            ("Your message could not be processed", 1),
        ]
        assert chat["messages"][1]["edits"] == answer.edits
        assert streams == {"streams": []}
