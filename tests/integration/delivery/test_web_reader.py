"""The web frames reader on the test broker: every replica reads all partitions, malformed records go to dlq.

A record produced before the service starts is served (the reader starts back in time), one that
is not a `WebFrame` becomes a dead letter with the reason, and the frames after it are served too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from collections.abc import Callable

import pytest
from rich.console import Console

from agentstream.config import Settings
from agentstream.contracts import WebFrame, WebFrameOp
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream.kafka.flavor import tuning
from agentstream.kafka.idle import GateState
from agentstream_delivery import bootstrap
from agentstream_testing.kafka import produce_raw, read_until

pytestmark = pytest.mark.integration


def frame(chat: str, message_id: str, text: str) -> bytes:
    record = WebFrame(chat_id=chat, message_id=message_id, op=WebFrameOp.SEND, text=text, final=True)
    return record.to_json()


async def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # noqa: ASYNC110 - polls state another task changes, no event to wait on
            await asyncio.sleep(0.05)


@pytest.mark.timeout(60)  # two services on the broker
async def test_replicas_read_every_chat_from_before_their_start_and_dead_letter_garbage(
    settings_factory: Callable[..., Settings], topics_created: str
) -> None:
    settings = settings_factory()
    bootstrap_servers, topic = settings.kafka.bootstrap_servers, f"{topics_created}web-frames"
    await produce_raw(bootstrap_servers, topic, frame("early", "m0", "before the replicas started"), b"early")
    replicas = [bootstrap(settings, console=Console(file=io.StringIO())) for _ in range(2)]
    async with (
        ServiceHost([replicas[0]], "127.0.0.1", {"delivery": free_port()}),
        ServiceHost([replicas[1]], "127.0.0.1", {"delivery": free_port()}),
    ):
        for replica in replicas:
            assert replica.web_reader is not None
            await asyncio.wait_for(replica.web_reader.ready.wait(), 30)
        await produce_raw(bootstrap_servers, topic, b'{"type": "web.frame", "chat_id": "x"}', b"x")
        for i in range(6):  # chats on both partitions
            await produce_raw(bootstrap_servers, topic, frame(f"chat-{i}", "m1", f"hello {i}"), f"chat-{i}".encode())
        for replica in replicas:
            await wait_for(lambda r=replica: all(r.web.messages(f"chat-{i}") for i in range(6)))  # type: ignore[misc]
        # every replica reads every record, so each dead-letters it: one letter per replica
        dead = await read_until(bootstrap_servers, f"{topics_created}dlq", lambda rs: len(rs) >= 2)
    for replica in replicas:
        assert [m.text for m in replica.web.messages("early")] == ["before the replicas started"]
        assert [m.text for m in replica.web.messages("chat-3")] == ["hello 3"]
    letters = [json.loads(r.value or b"") for r in dead]
    assert len(letters) == 2 and {letter["source_topic"] for letter in letters} == {topic}
    assert all("not a WebFrame" in letter["error"] and "message_id" in letter["error"] for letter in letters)


@pytest.mark.timeout(60)
async def test_an_idle_reader_stops_fetching_and_still_serves_frames_from_another_process(
    settings_factory: Callable[..., Settings], topics_created: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_factory()
    broker = tuning(settings.kafka)
    if broker.idle is None:
        pytest.skip("the broker wakes parked fetches: the reader is never paused")
    # No probe fetch in this test's time: the frame can only be found by the end watcher's ring. With the
    # 5 s probe, at load ~9 a probe once fetched it first and the ring the test asserts never came.
    paced = dataclasses.replace(broker, idle=dataclasses.replace(broker.idle, poll_s=3600.0))
    monkeypatch.setattr("agentstream_delivery.web_reader.tuning", lambda kafka: paced)
    bootstrap_servers, topic = settings.kafka.bootstrap_servers, f"{topics_created}web-frames"
    replica = bootstrap(settings, console=Console(file=io.StringIO()))
    async with ServiceHost([replica], "127.0.0.1", {"delivery": free_port()}):
        reader = replica.web_reader
        assert reader is not None
        await asyncio.wait_for(reader.ready.wait(), 30)
        await wait_for(lambda: reader.idle_gate is not None and reader.idle_gate.state is GateState.PAUSED)
        # produced by another client: no doorbell in this process, the end-offsets watcher wakes it
        rung = reader.idle_gate.doorbell.rings((topic,))
        await produce_raw(bootstrap_servers, topic, frame("outside", "m1", "from another replica"), b"outside")
        await wait_for(lambda: bool(replica.web.messages("outside")), timeout=30)
        assert [m.text for m in replica.web.messages("outside")] == ["from another replica"]
        # The end-offsets watcher saw the record and rang (a probe would have fetched it without a ring).
        assert reader.idle_gate.doorbell.rings((topic,)) > rung
        await wait_for(lambda: reader.idle_gate is not None and reader.idle_gate.state is GateState.PAUSED)
