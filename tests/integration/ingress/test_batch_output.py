"""ingress's batch output on the real broker: the partition a keyed send picks, order per key, few batches."""

from aiokafka import AIOKafkaProducer

from agentstream.contracts import InboundMessage, User
from agentstream.kafka import create_topics
from agentstream_ingress.batch_output import BatchOutput
from agentstream_testing.kafka import read_until

KEYS = [f"web:chat-{i}" for i in range(40)]


def message(i: int, text: str = "hi") -> InboundMessage:
    return InboundMessage(id=f"m-{i}", platform="web", chat_id=f"chat-{i % len(KEYS)}", user=User(id="u"), text=text)


async def test_output_lands_where_a_keyed_send_would_in_order(settings_factory):
    settings = settings_factory(kafka={"partitions": 4})
    await create_topics(settings.kafka)
    by_send, by_output = settings.topic("events"), settings.topic("runs")
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, acks="all")
    await producer.start()
    try:
        for key in KEYS:  # aiokafka's own choice, one keyed send per key
            await producer.send_and_wait(by_send, b"{}", key=key.encode())
        out = BatchOutput()
        for i in range(400):
            msg = message(i)
            out.add(by_output, msg, msg.conversation_key)
        acks = await out.send(producer)
        for ack in acks:
            await ack
    finally:
        await producer.stop()
    sent = await read_until(settings.kafka.bootstrap_servers, by_send, lambda rs: len(rs) >= len(KEYS))
    written = await read_until(settings.kafka.bootstrap_servers, by_output, lambda rs: len(rs) >= 400)

    expected = {r.key: r.partition for r in sent}
    assert len(set(expected.values())) > 1  # the keys really spread over the partitions
    assert all(r.partition == expected[r.key] for r in written)
    assert len(acks) == len(set(expected.values()))  # one record batch per partition, not per record
    for key in KEYS:  # each conversation's records in the order they were added
        ids = [InboundMessage.model_validate_json(r.value).id for r in written if r.key == key.encode()]
        seq = [int(i.removeprefix("m-")) for i in ids]
        assert seq == sorted(seq) and len(seq) == 10
    kind = str(getattr(message(0), "type", "")).encode()  # the headers `Runtime.publish` writes
    assert all(dict(r.headers) == {"content-type": b"application/json", "type": kind} for r in written)


async def test_a_large_output_goes_out_in_few_batches(settings_factory):
    settings = settings_factory(kafka={"partitions": 1})
    await create_topics(settings.kafka)
    topic = settings.topic("runs")
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, acks="all")
    await producer.start()
    try:
        out = BatchOutput()
        for i in range(600):  # ~1 KiB each: ~600 KiB, 37 batches at the producer's default 16 KiB
            out.add(topic, message(i, "x" * 800), "web:one")
        acks = await out.send(producer)
        for ack in acks:
            await ack
    finally:
        await producer.stop()
    assert len(acks) == 2
    written = await read_until(settings.kafka.bootstrap_servers, topic, lambda rs: len(rs) >= 600)
    assert [InboundMessage.model_validate_json(r.value).id for r in written] == [f"m-{i}" for i in range(600)]
