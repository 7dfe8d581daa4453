import asyncio
import random

import pytest

from agentstream.contracts import MessageDelta, ReplyTarget, RunHeartbeat, StartRun
from agentstream_runner.emitter import RunEmitter


def start() -> StartRun:
    return StartRun(
        run_id="r1",
        conversation_key="web:c1",
        assistant_id="default",
        text="hi",
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
    )


async def test_identity_and_seq_start_at_one():
    published = []

    async def publish(event):
        published.append(event)

    events = RunEmitter.for_start(start(), publish, epoch=3)
    first = await events.emit(RunHeartbeat)
    second = await events.emit(MessageDelta, message_id="m", text="x")
    assert [e.seq for e in published] == [1, 2]
    assert published == [first, second]
    assert (first.run_id, first.root_run_id, first.parent_run_id, first.depth) == ("r1", "r1", None, 0)
    assert (first.conversation_key, first.epoch) == ("web:c1", 3)


async def test_concurrent_emits_publish_in_seq_order():
    published = []

    async def publish(event):
        await asyncio.sleep(random.uniform(0, 0.003))  # publishes of varying latency
        published.append(event.seq)

    events = RunEmitter.for_start(start(), publish)
    await asyncio.gather(*(events.emit(RunHeartbeat) for _ in range(30)))
    assert published == list(range(1, 31))


async def test_failed_publish_never_reuses_a_seq():
    published = []
    fail = True

    async def publish(event):
        nonlocal fail
        if fail:
            fail = False
            raise ConnectionError("broker down")
        published.append(event.seq)

    events = RunEmitter.for_start(start(), publish)
    with pytest.raises(ConnectionError):
        await events.emit(RunHeartbeat)
    await events.emit(RunHeartbeat)
    assert published == [2]


class PipelinedBroker:
    """Hands out ack futures like the producer does; the test decides when each is acked."""

    def __init__(self) -> None:
        self.acks: list[tuple[int, asyncio.Future[object]]] = []

    async def publish(self, event):
        ack: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.acks.append((event.seq, ack))
        return ack


async def test_emit_does_not_wait_for_acks_and_confirm_waits_for_all():
    broker = PipelinedBroker()
    events = RunEmitter.for_start(start(), broker.publish)
    for _ in range(3):
        await events.emit(MessageDelta, message_id="m", text="x")  # returns with nothing acked
    assert [seq for seq, _ in broker.acks] == [1, 2, 3]

    confirming = asyncio.create_task(events.confirm())
    await asyncio.sleep(0.01)
    broker.acks[0][1].set_result("stored")
    broker.acks[2][1].set_result("stored")
    await asyncio.sleep(0.01)
    assert not confirming.done()  # seq 2 is still unacked
    broker.acks[1][1].set_result("stored")
    await asyncio.wait_for(confirming, 1)


async def test_a_refused_event_fails_the_next_emit_and_confirm():
    broker = PipelinedBroker()
    events = RunEmitter.for_start(start(), broker.publish)
    await events.emit(RunHeartbeat)
    broker.acks[0][1].set_exception(ConnectionError("broker refused seq 1"))
    with pytest.raises(ConnectionError, match="seq 1"):
        await events.emit(RunHeartbeat)
    # Reported once: the run goes on to emit its ending, and confirm sees only what came after.
    await events.emit(RunHeartbeat)
    broker.acks[-1][1].set_result("stored")
    await events.confirm()


async def test_child_emitters_share_the_roots_unconfirmed_acks():
    broker = PipelinedBroker()
    root = RunEmitter.for_start(start(), broker.publish)
    child = root.child("r2")
    await child.emit(RunHeartbeat)
    confirming = asyncio.create_task(root.confirm())
    await asyncio.sleep(0.01)
    assert not confirming.done()
    broker.acks[0][1].set_result("stored")
    await asyncio.wait_for(confirming, 1)
