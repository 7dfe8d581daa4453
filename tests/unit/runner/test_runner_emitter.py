import asyncio
import random

import pytest

from agentstream.contracts import MessageDelta, ReplyTarget, RunHeartbeat, StartRun
from agentstream_runner.emitter import RunEmitter


def start() -> StartRun:
    return StartRun(run_id="r1", conversation_key="web:c1", assistant_id="default", text="hi",
                    reply_target=ReplyTarget(platform="web", chat_id="c1"))


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
