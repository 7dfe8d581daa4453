"""Consumer: decode → handle → dead letter → commit, each named commit policy tested here once
(the services only name theirs: kafka/commit_policies.py)."""

import asyncio
from types import SimpleNamespace
from typing import Any

import structlog
from aiokafka import TopicPartition
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from pydantic import BaseModel, TypeAdapter

from agentstream.kafka.commit_policies import AfterOutputAcked, AtMostOnce, OldestOpen
from agentstream.kafka.consumer import (
    BatchConsumer,
    Consumed,
    Consumer,
    Contract,
    OutputAcks,
    Polling,
    Source,
    as_bytes,
)

TOPIC = "t.records"


class Record(BaseModel):
    n: int


ADAPTER = TypeAdapter(Record)


class Sinks:
    def __init__(self) -> None:
        self.dead: list[tuple[int, str]] = []
        self.failed: list[tuple[int, str]] = []

    async def dead_letter(self, record: Any, reason: str) -> None:
        self.dead.append((record.offset, reason))

    async def failure(self, record: Any, err: Exception) -> None:
        self.failed.append((record.offset, repr(err)))

    def source(self) -> Source:
        return Source(KafkaBroker(), "svc", structlog.get_logger("test"), {}, self.dead_letter, self.failure)


class FakeKafkaConsumer:
    """The aiokafka consumer's part a committer uses: its assignment and `commit`."""

    def __init__(self) -> None:
        self.commits: list[dict[int, int]] = []

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(TOPIC, 0)}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append({tp.partition: o for tp, o in offsets.items()})


def raw(offset: int, value: bytes, partition: int = 0) -> Any:
    return SimpleNamespace(topic=TOPIC, partition=partition, offset=offset, value=value, key=None, timestamp=0)


def good(n: int) -> bytes:
    return Record(n=n).model_dump_json().encode()


def attach(consumer: Consumer[Any] | BatchConsumer) -> FakeKafkaConsumer:
    kafka = FakeKafkaConsumer()
    consumer.subscriber.consumer = kafka  # what FastStream sets once the subscriber started
    return kafka


async def test_at_most_once_leaves_commits_to_the_client_and_hands_typed_records():
    sinks = Sinks()
    seen: list[Consumed[Record]] = []

    async def handler(consumed: Consumed[Record]) -> None:
        seen.append(consumed)

    consumer = Consumer(
        sinks.source(),
        topic=TOPIC,
        group="g",
        policy=AtMostOnce(),
        decode=Contract(ADAPTER, "Record"),
        handler=handler,
    )
    assert consumer.subscriber.ack_policy is not AckPolicy.MANUAL  # aiokafka's auto-commit
    assert consumer.committer is None and consumer.points is None
    await consumer.handle([raw(0, good(1)), raw(1, b"{not json"), raw(2, b'{"n": "x"}')])
    assert [(c.record, c.offset) for c in seen] == [(Record(n=1), 0)]
    assert [offset for offset, _ in sinks.dead] == [1, 2]
    assert sinks.dead[0][1].startswith("not valid JSON") and sinks.dead[1][1].startswith("invalid Record")


async def test_oldest_open_commits_what_is_handled_never_past_a_held_or_named_unit():
    sinks = Sinks()
    buffered: dict[int, int] = {}  # partition → first offset of a unit the service keeps elsewhere

    async def handler(consumed: Consumed[Record]) -> None:
        if consumed.record.n == 13:
            raise RuntimeError("a bug")
        if consumed.record.n == 7:
            assert consumer.points is not None
            consumer.points.hold(consumed.partition, consumed.offset)  # a unit opened here (a stream)

    consumer = Consumer(
        sinks.source(),
        topic=TOPIC,
        group="g",
        policy=OldestOpen(oldest_of=buffered.get),
        decode=Contract(ADAPTER, "Record"),
        handler=handler,
    )
    assert consumer.subscriber.ack_policy is AckPolicy.MANUAL
    kafka = attach(consumer)
    await consumer.handle([raw(0, good(1)), raw(1, b"nope"), raw(2, good(13)), raw(3, good(2))])
    assert [o for o, _ in sinks.dead] == [1] and [o for o, _ in sinks.failed] == [2]
    await consumer.commit()
    assert kafka.commits == [{0: 4}]  # handled, dead-lettered and failed records alike are done
    await consumer.handle([raw(4, good(7)), raw(5, good(3))])
    await consumer.commit()
    assert kafka.commits[-1] == {0: 4}  # held at the open unit
    assert consumer.points is not None
    consumer.points.release(0, 4)
    buffered[0] = 5  # the service's own unit, named by `oldest_of`
    await consumer.commit()
    assert kafka.commits[-1] == {0: 5}
    del buffered[0]
    await consumer.flush()
    assert kafka.commits[-1] == {0: 6}


async def test_oldest_open_commits_periodically_when_asked():
    sinks = Sinks()

    async def handler(consumed: Consumed[Record]) -> None:
        return None

    consumer = Consumer(
        sinks.source(),
        topic=TOPIC,
        group="g",
        policy=OldestOpen(every_s=0.01),
        decode=Contract(ADAPTER, "Record"),
        handler=handler,
    )
    kafka = attach(consumer)
    consumer.start()
    try:
        await consumer.handle([raw(0, good(1))])
        for _ in range(500):
            if kafka.commits:
                break
            await asyncio.sleep(0.01)
    finally:
        await consumer.stop()
    assert kafka.commits == [{0: 1}]


async def test_oldest_open_with_each_record_open_commits_a_record_once_done():
    sinks = Sinks()
    handled: list[Consumed[Record]] = []

    async def handler(consumed: Consumed[Record]) -> None:
        handled.append(consumed)  # its work goes on elsewhere: done later

    consumer = Consumer(
        sinks.source(),
        topic=TOPIC,
        group="g",
        policy=OldestOpen(each_record_open=True, commit_within_s=0.0),
        decode=Contract(ADAPTER, "Record"),
        handler=handler,
        polling=Polling(max_records=10, wait_ms=5, at_once=True),
    )
    kafka = attach(consumer)
    await consumer.handle([raw(0, good(1)), raw(1, b"nope"), raw(2, good(2))])
    await consumer.flush()
    assert all(c == {0: 0} for c in kafka.commits)  # record 0 is still open
    consumer.done(handled[1])
    await consumer.flush()
    assert all(c == {0: 0} for c in kafka.commits)  # 1 dead-lettered, 2 done: 0 still holds
    consumer.done(handled[0])
    await consumer.flush()
    assert kafka.commits[-1] == {0: 3}


async def test_after_output_acked_commits_a_batch_once_its_output_is_acked():
    sinks = Sinks()
    acks: list[asyncio.Future[None]] = []
    fail = False

    async def handler(batch: list[Consumed[bytes]]) -> OutputAcks:
        if fail:
            raise RuntimeError("a bug")
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        acks.append(ack)
        return OutputAcks([ack])

    consumer = BatchConsumer(
        sinks.source(),
        topic=TOPIC,
        group="g",
        policy=AfterOutputAcked(),
        handler=handler,
        polling=Polling(max_records=10, wait_ms=5),
    )
    assert consumer.subscriber.ack_policy is AckPolicy.MANUAL
    kafka = attach(consumer)
    kafka.positions = {}  # type: ignore[attr-defined]
    await consumer.handle([raw(0, b"a"), raw(1, b"b")])
    await asyncio.sleep(0.01)
    assert all(c == {0: 0} for c in kafka.commits)  # nothing past the unacked batch
    acks[0].set_result(None)
    await consumer.flush()
    assert kafka.commits[-1] == {0: 2}
    fail = True  # a handler that raises: every record of the batch is dead-lettered, read past
    await consumer.handle([raw(2, b"c"), raw(3, b"d")])
    await consumer.flush()
    assert [o for o, _ in sinks.failed] == [2, 3] and kafka.commits[-1] == {0: 4}


async def test_as_bytes_hands_the_bytes_as_they_are():
    sinks = Sinks()
    seen: list[bytes] = []

    async def handler(consumed: Consumed[bytes]) -> None:
        seen.append(consumed.record)

    consumer = Consumer(
        sinks.source(), topic=(TOPIC, "t.other"), group="g", policy=AtMostOnce(), decode=as_bytes, handler=handler
    )
    await consumer.handle([raw(0, b"{not json")])
    assert seen == [b"{not json"] and sinks.dead == []


async def test_without_a_group_nothing_is_committed_and_a_committing_policy_is_refused():
    sinks = Sinks()

    async def handler(consumed: Consumed[bytes]) -> None:
        pass

    consumer = Consumer(sinks.source(), topic=TOPIC, group=None, policy=AtMostOnce(), decode=as_bytes, handler=handler)
    assert consumer.subscriber.group_id is None and consumer.points is None
    try:
        Consumer(sinks.source(), topic=TOPIC, group=None, policy=OldestOpen(), decode=as_bytes, handler=handler)
    except ValueError as err:
        assert "group" in str(err)
    else:
        raise AssertionError("an OldestOpen consumer without a group was built")


async def test_co_partitioned_topics_report_the_partitions_of_the_one_named():
    told: list[set[int]] = []

    async def revoked(partitions: set[int]) -> None:
        told.append(partitions)

    async def handler(consumed: Consumed[bytes]) -> None:
        pass

    consumer = Consumer(
        Sinks().source(),
        topic=(TOPIC, "t.other"),
        group="g",
        policy=AtMostOnce(),
        decode=as_bytes,
        handler=handler,
        on_revoked=revoked,
        partitions_of=TOPIC,
    )
    listener = consumer.subscriber._listener  # where FastStream keeps the rebalance listener it gives aiokafka
    await listener.on_partitions_revoked(
        {TopicPartition(TOPIC, 1), TopicPartition("t.other", 1), TopicPartition("t.other", 2)}
    )
    assert told == [{1}]
