"""Runtime.publish / publish_nowait / publish_batched on the real broker: order, keys, headers, acks, the counter."""

import asyncio
from typing import Any

from agentstream.contracts import Notice, ReplyTarget
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream.kafka.internals import partition_of_key, producer_of, refuse_sends, restore_sends
from agentstream.kafka.producer import OutputHeld
from agentstream.kafka.topics import EVENTS
from agentstream_testing.kafka import read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor


def notice(seq: int) -> Notice:
    return Notice(
        run_id="r1",
        root_run_id="r1",
        conversation_key="web:a",
        seq=seq,
        level="info",
        text=f"n{seq}",
        reply_target=ReplyTarget(platform="web", chat_id="a"),
    )


async def test_records_handed_over_without_waiting_arrive_in_order_with_their_acks(settings_factory, topics_created):
    settings = settings_factory()
    svc = bootstrap_tool_executor(settings)  # any service: publishing is the publisher part's
    topic = svc.topics.events
    async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
        # Keyed by the topic's key of each record (its conversation key): no key passed.
        acks = [await svc.runtime.publish_nowait(EVENTS, notice(seq)) for seq in range(1, 51)]
        offsets = [(await ack).offset for ack in acks]
        await svc.runtime.publish(EVENTS, notice(51))
        records = await read_until(settings.kafka.bootstrap_servers, topic, lambda rs: len(rs) >= 51)
        published = svc.registry.get_sample_value(
            "agentstream_records_published_total", {"service": svc.name, "topic": topic}
        )

    assert offsets == sorted(offsets) and len(set(offsets)) == 50
    assert [Notice.model_validate_json(r.value).seq for r in records] == list(range(1, 52))
    assert {r.key for r in records} == {b"web:a"}
    assert dict(records[0].headers) == {"content-type": b"application/json", "type": b"notice"}
    assert published == 51


async def test_records_queued_in_one_turn_leave_as_one_batch_per_partition_in_order(settings_factory, topics_created):
    settings = settings_factory()
    svc = bootstrap_tool_executor(settings)
    topic = svc.topics.events
    keys = [f"web:{chat}" for chat in "abcdefgh"]  # several partitions (kafka.partitions of them)
    async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
        producer = producer_of(svc.runtime.infra.broker)
        batches: list[tuple[str, int]] = []
        send_batch = producer.send_batch

        async def counted(builder: Any, topic: str, *, partition: int, **kw: Any) -> Any:
            batches.append((topic, partition))
            return await send_batch(builder, topic, partition=partition, **kw)

        producer.send_batch = counted  # type: ignore[method-assign]
        acked = [svc.runtime.publish_batched(EVENTS, notice(seq), key=keys[seq % len(keys)]) for seq in range(1, 41)]
        await asyncio.gather(*acked)  # every record's own ack
        partitions = sorted(await producer.partitions_for(topic))
        records = await read_until(settings.kafka.bootstrap_servers, topic, lambda rs: len(rs) >= 40)
        published = svc.registry.get_sample_value(
            "agentstream_records_published_total", {"service": svc.name, "topic": topic}
        )

    by_key: dict[bytes | None, list[int]] = {}
    for r in records:  # each key on the partition a keyed `send` picks, in the order queued
        assert r.partition == partition_of_key(r.key or b"", partitions)
        by_key.setdefault(r.key, []).append(Notice.model_validate_json(r.value or b"").seq)
    assert by_key == {k.encode(): [s for s in range(1, 41) if keys[s % len(keys)] == k] for k in keys}
    used = {r.partition for r in records}
    assert sorted(batches) == sorted((topic, p) for p in used)  # one batch per partition, not a send per record
    assert published == 40


async def test_a_refused_batch_fails_each_record_s_future(settings_factory, topics_created):
    settings = settings_factory()
    svc = bootstrap_tool_executor(settings)
    async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
        producer = producer_of(svc.runtime.infra.broker)
        refuse_sends(producer, lambda: OutputHeld("broker lost"))  # what the output gate does
        try:
            acked = [svc.runtime.publish_batched(EVENTS, notice(seq)) for seq in (1, 2)]
            outcomes = await asyncio.gather(*acked, return_exceptions=True)
        finally:
            restore_sends(producer)
        again = svc.runtime.publish_batched(EVENTS, notice(3))  # the next wave goes out again
        await again

    assert [type(o) for o in outcomes] == [OutputHeld, OutputHeld]
