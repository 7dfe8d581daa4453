"""A consumer is one component: topic, group, named commit policy, typed handler.

It owns what every service used to write around its handler: the FastStream subscriber
(manual acks unless the policy is `AtMostOnce`), decoding each record into its contract, the
dead letter of a record that is not one, the dead letter of a record whose handler raised,
and the offset commits its policy names (kafka/commit_policies.py). Handlers get `Consumed[R]`:
the typed record and where it was read, never FastStream's message.

FastStream keeps the consume loop (group membership, fetching, rebalance listener, its
middlewares: telemetry, Prometheus, the handler guard); docs/decisions.md § Kafka layer says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, assert_never

from aiokafka import AIOKafkaConsumer, ConsumerRecord
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from pydantic import TypeAdapter

from agentstream.kafka.batch_commits import BatchCommits
from agentstream.kafka.commit_policies import AfterOutputAcked, AtMostOnce, CommitPolicy, OldestOpen
from agentstream.kafka.commits import CommitPoints, OffsetCommitter
from agentstream.kafka.decoding import Undecodable, decode_record
from agentstream.kafka.guard import records_of
from agentstream.kafka.internals import consumer_of, poll_batches_at_once
from agentstream.kafka.revocations import OnPartitions, RevocationListener
from agentstream.observability import record_log_context

R = TypeVar("R")
T = TypeVar("T")

DeadLetterSink = Callable[[ConsumerRecord, str], Awaitable[None]]  # (record, reason): to `dlq`
FailureSink = Callable[[ConsumerRecord, Exception], Awaitable[None]]  # a handler raised: logged, to `dlq`


class NotTheContract(Exception):
    """Raised by a decoder: the record is not what its topic carries (`reason`: the dead letter's)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


Decoder = Callable[[bytes], R]  # a record's bytes as its contract; raises `NotTheContract`


class Contract(Generic[T]):
    """Decode JSON into `adapter`'s type; `what` names it in a dead letter's reason."""

    def __init__(self, adapter: TypeAdapter[T], what: str) -> None:
        self.adapter = adapter
        self.what = what

    def __call__(self, raw: bytes, /) -> T:
        decoded = decode_record(raw, self.adapter, self.what)
        if isinstance(decoded, Undecodable):
            raise NotTheContract(decoded.reason)
        return decoded


def as_bytes(raw: bytes, /) -> bytes:
    """No decoding: the handler decides about the bytes itself (delivery's hooks)."""
    return raw


@dataclass(frozen=True, slots=True)
class Consumed(Generic[R]):
    """A decoded record and where it was read (`source`: its topic, offset, key, headers)."""

    record: R
    source: ConsumerRecord

    @property
    def partition(self) -> int:
        return int(self.source.partition)

    @property
    def offset(self) -> int:
        return int(self.source.offset)

    @property
    def topic(self) -> str:
        return str(self.source.topic)

    @property
    def timestamp_ms(self) -> int:
        return int(self.source.timestamp)


@dataclass(frozen=True)
class Polling:
    """Records taken in batches of up to `max_records`, an empty poll waiting `wait_ms`;
    `at_once`: poll again right after an empty poll (FastStream sleeps `wait_ms` first)."""

    max_records: int
    wait_ms: int
    at_once: bool = False


@dataclass(frozen=True)
class OutputAcks:
    """What a batch handler handed the producer: the batch is committed once `acks` are done and
    `after` ran; if an ack fails, `undo` runs and the batch is read again."""

    acks: Sequence[asyncio.Future[Any]]
    after: Callable[[], Awaitable[None]] | None = None
    undo: Callable[[], None] | None = None


@dataclass(frozen=True)
class Source:
    """What every consumer of a service shares: its broker, where records go wrong, its name."""

    broker: KafkaBroker
    service: str
    log: Any
    options: Mapping[str, Any]  # `broker.subscriber` keyword arguments (kafka/broker.py `consumer_options`)
    dead_letter: DeadLetterSink
    failed: FailureSink


@dataclass
class _Subscription:
    """The FastStream subscriber behind a consumer, and the aiokafka consumer it reads with."""

    subscriber: Any = field(default=None)

    def consumer(self) -> AIOKafkaConsumer | None:
        return consumer_of(self.subscriber)


def _subscribe(
    source: Source,
    topics: Sequence[str],
    group: str | None,
    manual: bool,
    polling: Polling | None,
    on_revoked: OnPartitions | None,
    on_assigned: OnPartitions | None,
    extra: Mapping[str, Any],
    partitions_of: str | None = None,
) -> Any:
    options: dict[str, Any] = {**source.options, "group_id": group, **extra}
    if manual:
        # FastStream's default, ACK_FIRST, turns aiokafka's periodic auto-commit on, which may
        # commit a record that is still being handled.
        options["ack_policy"] = AckPolicy.MANUAL
    if polling is not None:
        options |= {"batch": True, "max_records": polling.max_records, "batch_timeout_ms": polling.wait_ms}
    if on_revoked is not None:
        topic = partitions_of or (topics[0] if len(topics) == 1 else None)
        options["listener"] = RevocationListener(on_revoked, topic=topic, on_assigned=on_assigned)
    subscriber = source.broker.subscriber(*topics, **options)
    if polling is not None and polling.at_once:
        poll_batches_at_once(subscriber)
    return subscriber


class Consumer(Generic[R]):
    """Records one by one: decode → handle → (dead letter) → commit by `policy`.

    With `polling`, records come in batches and are still handled one by one (one record's
    failure is its own). A record's failure (the handler raised) is dead-lettered and read past.
    `group` None: no consumer group (every instance reads every partition, nothing committed;
    `AtMostOnce` only). `partitions_of`: with several co-partitioned topics, the one whose
    partitions `on_revoked`/`on_assigned` are told (default: each topic's).
    """

    def __init__(
        self,
        source: Source,
        *,
        topic: str | Sequence[str],
        group: str | None,
        policy: AtMostOnce | OldestOpen,
        decode: Callable[[bytes], R],
        handler: Callable[[Consumed[R]], Awaitable[None]],
        polling: Polling | None = None,
        on_revoked: OnPartitions | None = None,
        on_assigned: OnPartitions | None = None,
        subscriber_options: Mapping[str, Any] | None = None,
        partitions_of: str | None = None,
    ) -> None:
        self.topics = (topic,) if isinstance(topic, str) else tuple(topic)
        self.group = group
        self.policy = policy
        self.decode = decode
        self.handler = handler
        self._source = source
        self._sub = _Subscription()
        self.committer: OffsetCommitter | None = None
        self._soon: asyncio.Task[None] | None = None
        self._periodic: asyncio.Task[None] | None = None
        match policy:
            case AtMostOnce():
                manual = False
            case OldestOpen(oldest_of=oldest_of):
                manual = True
                if group is None:
                    raise ValueError("an OldestOpen consumer commits: it needs a group")
                if len(self.topics) != 1:
                    raise ValueError("an OldestOpen consumer reads one topic")
                self.committer = OffsetCommitter(self.topics[0], self._sub.consumer, source.log, oldest_of=oldest_of)
            case _:
                assert_never(policy)
        self.subscriber = self._sub.subscriber = _subscribe(
            source,
            self.topics,
            group,
            manual,
            polling,
            on_revoked,
            on_assigned,
            subscriber_options or {},
            partitions_of,
        )
        self.subscriber(self._on_message)

    @property
    def points(self) -> CommitPoints | None:
        return self.committer.points if self.committer is not None else None

    def consumer(self) -> AIOKafkaConsumer | None:
        """The aiokafka consumer reading now (None before the broker started)."""
        return self._sub.consumer()

    async def _on_message(self, msg: KafkaMessage) -> None:
        await self.handle(records_of(msg))

    async def handle(self, records: Sequence[ConsumerRecord]) -> None:
        """The records of one poll, in order."""
        with record_log_context(self._source.service):
            for record in records:
                await self._one(record)

    async def _one(self, record: ConsumerRecord) -> None:
        points = self.points
        each_open = isinstance(self.policy, OldestOpen) and self.policy.each_record_open
        if points is not None and each_open:
            points.hold(record.partition, record.offset)
            points.read(record.partition, record.offset)
        try:
            try:
                decoded = self.decode(record.value or b"")
            except NotTheContract as err:
                await self._source.dead_letter(record, err.reason)
                handled = False
            else:
                await self.handler(Consumed(decoded, record))
                handled = True
        except Exception as err:  # that record's failure alone: logged, dead-lettered, read past
            await self._source.failed(record, err)
            handled = False
        if points is None:
            return
        if not each_open:
            points.read(record.partition, record.offset)
        elif not handled:  # dead-lettered: nothing of it stays open
            self.done_at(record.partition, record.offset)

    # -- commits (OldestOpen) ---------------------------------------------------------
    def done(self, consumed: Consumed[Any]) -> None:
        """With `each_record_open`: the record's unit is over (e.g. its result is stored)."""
        self.done_at(consumed.partition, consumed.offset)

    def done_at(self, partition: int, offset: int) -> None:
        assert self.committer is not None and isinstance(self.policy, OldestOpen)
        self.committer.points.release(partition, offset)
        if self._soon is None or self._soon.done():
            self._soon = asyncio.create_task(self._commit_within(self.policy.commit_within_s), name="commit-soon")

    async def _commit_within(self, delay_s: float) -> None:
        """One commit for the records done within `delay_s`: a commit per record cost the broker
        a request per record. A crash before it only means those records are read again."""
        await asyncio.sleep(delay_s)
        await self.commit()

    async def commit(self) -> None:
        if self.committer is not None:
            await self.committer.commit()

    def commit_soon(self) -> None:
        if self.committer is not None:
            self.committer.commit_soon()

    async def flush(self) -> None:
        """Wait for the rounds under way, then commit what is due (a revocation, a stop)."""
        if self._soon is not None:
            await asyncio.wait({self._soon})
        if self.committer is not None:
            await self.committer.flush()

    def forget(self, partitions: set[int]) -> None:
        if self.committer is not None:
            self.committer.forget(partitions)

    def reset(self) -> None:
        """The broker lost its records (a new cluster): the positions read mean nothing now."""
        if self.committer is not None:
            self.committer.points.reset()

    def start(self) -> None:
        """The periodic commit round, if the policy has one."""
        if self.committer is not None and isinstance(self.policy, OldestOpen) and self.policy.every_s:
            self._periodic = asyncio.create_task(
                self.committer.run(self.policy.every_s), name=f"commits-{self.topics[0]}"
            )

    async def stop(self) -> None:
        for task in (self._periodic, self._soon):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.wait({task})


class BatchConsumer:
    """A batch at a time, committed `AfterOutputAcked`: the handler returns the acks of what it
    handed the producer for the batch (kafka/batch_commits.py). No decoding: the handler decides
    about each record's bytes itself (ingress's pipeline, which tells a sender why a record is refused)."""

    def __init__(
        self,
        source: Source,
        *,
        topic: str,
        group: str,
        policy: AfterOutputAcked,
        handler: Callable[[list[Consumed[bytes]]], Awaitable[OutputAcks]],
        polling: Polling,
    ) -> None:
        self.topics = (topic,)
        self.group = group
        self.policy = policy
        self.handler = handler
        self._source = source
        self._sub = _Subscription()
        self.commits = BatchCommits(topic, self._sub.consumer, source.log)
        self.committer = self.commits.committer
        self.subscriber = self._sub.subscriber = _subscribe(
            source, self.topics, group, True, polling, self.commits.partitions_revoked, None, {}
        )
        self.subscriber(self._on_message)

    @property
    def points(self) -> CommitPoints:
        return self.commits.points

    def consumer(self) -> AIOKafkaConsumer | None:
        return self._sub.consumer()

    async def _on_message(self, msg: KafkaMessage) -> None:
        await self.handle(records_of(msg))

    async def handle(self, records: Sequence[ConsumerRecord]) -> None:
        batch = [Consumed(r.value or b"", r) for r in records]
        try:
            with record_log_context(self._source.service):
                outcome = await self.handler(batch)
        except Exception as err:  # which record broke it is unknown: each goes to `dlq`, to replay
            for record in records:
                await self._source.failed(record, err)
            outcome = OutputAcks(())
        self.commits.after_acks(outcome.acks, batch, outcome.after, outcome.undo)

    async def flush(self) -> None:
        await self.commits.flush()

    def reset(self) -> None:
        self.commits.points.reset()

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


AnyConsumer = Consumer[Any] | BatchConsumer
__all__ = [
    "AfterOutputAcked",
    "AnyConsumer",
    "AtMostOnce",
    "BatchConsumer",
    "CommitPolicy",
    "Consumed",
    "Consumer",
    "OldestOpen",
    "OutputAcks",
    "Polling",
    "NotTheContract",
    "Source",
    "as_bytes",
    "Contract",
]
