"""Runtime.publish / publish_nowait on the real broker: order, keys, headers, acks, the counter."""

from agentstream.contracts import Notice, ReplyTarget
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
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
