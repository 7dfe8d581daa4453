"""ingress commits its `inbound` offsets by hand, once a batch's output is in Kafka."""

import asyncio
import json

from aiokafka import AIOKafkaConsumer, TopicPartition

from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_testing.kafka import produce_raw, read_until


async def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        await consumer.stop()


async def test_offsets_are_committed_after_the_output_and_auto_commit_is_off(settings_factory, topics_created):
    settings = settings_factory()
    svc = bootstrap_ingress(settings)
    bootstrap, t = settings.kafka.bootstrap_servers, svc.topics
    async with ServiceHost([svc], "127.0.0.1", {"ingress": free_port()}):
        consumer = svc.inbound.consumer()
        assert consumer is not None and not consumer._enable_auto_commit  # nothing commits behind our back
        for i in range(6):
            msg = {"id": f"m-{i}", "platform": "web", "chat_id": f"c{i}", "user": {"id": "u"}, "text": "hello"}
            await produce_raw(bootstrap, t.inbound, json.dumps(msg).encode(), key=f"web:c{i}".encode())
        await read_until(bootstrap, t.runs, lambda rs: len(rs) >= 6)
        ends = await consumer.end_offsets([TopicPartition(t.inbound, p) for p in range(settings.kafka.partitions)])
        expected = {tp.partition: offset for tp, offset in ends.items()}
        for _ in range(100):  # committed in the background, shortly after the output
            points = await committed(bootstrap, svc.runtime.group_id, t.inbound, settings.kafka.partitions)
            if points == expected:
                break
            await asyncio.sleep(0.1)
    assert points == expected and sum(expected.values()) == 6


async def test_a_batch_whose_output_failed_is_read_again_and_every_run_starts_once(
    settings_factory, topics_created, monkeypatch
):
    """The producer gives up on the first batch: it is not committed, the consumer seeks back,
    and the re-read starts every run (its dedupe rows did not count), none of them twice."""
    from agentstream.contracts import StartRun
    from agentstream_ingress import app as ingress_app

    real_send, failed_batches = ingress_app.BatchOutput.send, []

    async def send_failing_once(self, producer):  # type: ignore[no-untyped-def]
        if failed_batches:
            return await real_send(self, producer)
        failed_batches.append(len(self.records))
        self.records = []
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lost.set_exception(RuntimeError("KafkaTimeoutError: the producer gave up"))
        return [lost]

    monkeypatch.setattr(ingress_app.BatchOutput, "send", send_failing_once)
    settings = settings_factory()
    svc = bootstrap_ingress(settings)
    bootstrap, t = settings.kafka.bootstrap_servers, svc.topics
    for i in range(6):  # in the topic before ingress starts: the first batch holds several
        # one user each: the rate limiter (in memory) saw the failed batch too
        msg = {"id": f"m-{i}", "platform": "web", "chat_id": f"c{i}", "user": {"id": f"u{i}"}, "text": f"hello {i}"}
        await produce_raw(bootstrap, t.inbound, json.dumps(msg).encode(), key=f"web:c{i}".encode())
    async with ServiceHost([svc], "127.0.0.1", {"ingress": free_port()}):
        await read_until(bootstrap, t.runs, lambda rs: len(rs) >= 6)
        consumer = svc.inbound.consumer()
        ends = await consumer.end_offsets([TopicPartition(t.inbound, p) for p in range(settings.kafka.partitions)])
        expected = {tp.partition: offset for tp, offset in ends.items()}
        for _ in range(100):
            points = await committed(bootstrap, svc.runtime.group_id, t.inbound, settings.kafka.partitions)
            if points == expected:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # a duplicate would land meanwhile
        runs = await read_until(bootstrap, t.runs, lambda rs: len(rs) >= 6)
    assert failed_batches and failed_batches[0] >= 2  # the failed batch had output (queued + start per run)
    started = sorted(StartRun.model_validate_json(r.value).inbound_id for r in runs)
    assert started == [f"m-{i}" for i in range(6)]  # every message once: none lost, none twice
    assert points == expected
