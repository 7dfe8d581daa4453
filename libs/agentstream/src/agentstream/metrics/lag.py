"""Consumer lag per group, topic and partition, exported by the service that owns the group.

Every `interval_s` the group's committed offsets (OffsetFetch, through a consumer that carries the
group id but never joins it: Tansu breaks the connection of aiokafka's admin OffsetFetch) and the
partitions' first and end offsets (ListOffsets) are read; lag = end − committed (a partition never
committed counts from its first offset, where the group starts reading). A handful of small
requests per interval whatever the traffic: cheap enough to run in every replica.

Tansu answers ListOffsets with the last record *batch's* base offset + 1 (docs/decisions.md,
Brokers and clients). Against it (`tuning(kafka).end_offset_is_log_end` false), a partition whose listed end moved is read
once from listed end − 1: the last batch comes back whole and its last offset + 1 is the true end.
An unchanged listed end reuses the previous answer, so a quiet topic costs no fetch.

The committed offset's age says why a lag stands: how old the oldest record the group has not
committed is (its timestamp to now; 0 when nothing is uncommitted). A group that keeps up but
holds its commit back (an open unit of work that never closes) shows an age that grows with
the clock while its lag may look modest; one short of capacity shows both growing with the
traffic. The record at the committed offset is fetched once per offset (a commit that did not
move costs no fetch).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from prometheus_client import CollectorRegistry

from agentstream.config import KafkaSettings
from agentstream.kafka.flavor import tuning
from agentstream.kafka.internals import refresh_metadata
from agentstream.kafka.security import client_security
from agentstream.metrics.declare import counter, gauge

END_FETCH_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Subscription:
    """A consumer group and the topics it reads."""

    group: str
    topics: tuple[str, ...]


class LagMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        at = ("group", "topic", "partition")
        self.lag = gauge(
            registry,
            "agentstream_consumer_lag",
            "Records not yet committed by the group: end offset minus committed offset",
            *at,
        )
        self.committed = gauge(
            registry,
            "agentstream_consumer_committed_offset",
            "The group's committed offset (the next record it reads)",
            *at,
        )
        self.end = gauge(
            registry,
            "agentstream_topic_end_offset",
            "The partition's end offset (the offset its next record gets)",
            *at[1:],
        )
        self.committed_age = gauge(
            registry,
            "agentstream_consumer_committed_offset_age_seconds",
            "How old the oldest record the group has not committed is (0 when it committed everything)",
            *at,
        )
        self.polls = counter(
            registry,
            "agentstream_consumer_lag_polls_total",
            "Lag readings by outcome (failed: the broker did not answer; the previous values stay)",
            "outcome",
        )


def lag_of(end: int, committed: int | None, start: int) -> int:
    """A never-committed partition is read from its first offset (`auto_offset_reset=earliest`)."""
    position = committed if committed is not None and committed >= 0 else start
    return max(end - position, 0)


def committed_age_s(first_uncommitted_ms: int | None, now_ms: int) -> float:
    """Seconds since the oldest uncommitted record was written; 0 when there is none (or its time
    is unknown: a record deleted by retention meanwhile)."""
    if first_uncommitted_ms is None or first_uncommitted_ms < 0:
        return 0.0
    return max(now_ms - first_uncommitted_ms, 0) / 1000


class ConsumerLag:
    """Reads and exports the lag of `subscriptions` every `interval_s` (`run`), or once (`poll`)."""

    def __init__(
        self,
        kafka: KafkaSettings,
        subscriptions: Sequence[Subscription],
        metrics: LagMetrics,
        log: Any,
        *,
        interval_s: float,
        client_id: str,
    ) -> None:
        self.kafka = kafka
        self.subscriptions = list(subscriptions)
        self.metrics = metrics
        self.log = log
        self.interval_s = interval_s
        self.client_id = client_id
        self._groups: dict[str, AIOKafkaConsumer] = {}  # group → a consumer with its id, never subscribed
        self._consumer: AIOKafkaConsumer | None = None  # no group: reads the last batches (Tansu)
        self._true_ends: dict[TopicPartition, tuple[int, int]] = {}  # listed end → true end (Tansu)
        self._record_times: dict[TopicPartition, tuple[int, int]] = {}  # offset → its record's timestamp (ms)

    async def run(self) -> None:
        while True:
            await self.poll()
            await asyncio.sleep(self.interval_s)

    async def poll(self) -> bool:
        """One reading; False (and the clients reopened next time) when the broker did not answer."""
        try:
            await self._poll()
        except Exception as err:
            self.metrics.polls.labels("failed").inc()
            self.log.warning("consumer lag not read", error=type(err).__name__)
            await self.close()
            return False
        self.metrics.polls.labels("ok").inc()
        return True

    async def close(self) -> None:
        consumers = [*self._groups.values(), *([self._consumer] if self._consumer else [])]
        self._groups, self._consumer = {}, None
        for consumer in consumers:
            with contextlib.suppress(Exception):
                await consumer.stop()

    async def _started(self, group: str | None) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.kafka.bootstrap_servers,
            client_id=self.client_id,
            group_id=group,
            enable_auto_commit=False,
            fetch_max_wait_ms=tuning(self.kafka).fetch_max_wait_ms,
            **client_security(self.kafka),
        )
        await consumer.start()
        return consumer

    async def _poll(self) -> None:
        if self._consumer is None:
            self._consumer = await self._started(None)
        consumer = self._consumer
        known = await consumer.topics()
        # topics() reads a metadata copy of its own: the consumer's partitions may predate a topic
        # (Apache Kafka answers the empty topic list of its bootstrap request with no topic; Tansu with all).
        if any(t in known and not consumer.partitions_for_topic(t) for sub in self.subscriptions for t in sub.topics):
            await refresh_metadata(consumer)
        for sub in self.subscriptions:
            if sub.group not in self._groups:
                self._groups[sub.group] = await self._started(sub.group)
            group = self._groups[sub.group]
            partitions = [
                TopicPartition(topic, p)
                for topic in sub.topics
                if topic in known
                for p in sorted(consumer.partitions_for_topic(topic) or ())
            ]
            if not partitions:
                continue
            offsets = await asyncio.gather(*(group.committed(tp) for tp in partitions))
            committed = {tp: offset for tp, offset in zip(partitions, offsets, strict=True) if offset is not None}
            listed = await consumer.end_offsets(partitions)
            starts = await consumer.beginning_offsets(partitions)
            ends = (
                dict(listed)
                if tuning(self.kafka).end_offset_is_log_end
                else await self._true_end_offsets(consumer, listed)
            )
            positions = {tp: _position(committed.get(tp), starts.get(tp, 0)) for tp in ends}
            times = await self._times_at(consumer, {tp: at for tp, at in positions.items() if at < ends[tp]})
            self._export(sub.group, ends, committed, starts, times)

    def _export(
        self,
        group: str,
        ends: Mapping[TopicPartition, int],
        committed: Mapping[TopicPartition, int],
        starts: Mapping[TopicPartition, int],
        times: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        now_ms = int(time.time() * 1000)
        for tp, end in ends.items():
            labels = (group, tp.topic, str(tp.partition))
            self.metrics.end.labels(tp.topic, str(tp.partition)).set(end)
            offset = committed.get(tp)
            if offset is not None and offset >= 0:
                self.metrics.committed.labels(*labels).set(offset)
            lag = lag_of(end, offset, starts.get(tp, 0))
            self.metrics.lag.labels(*labels).set(lag)
            first_ms = (times or {}).get(tp) if lag else None
            self.metrics.committed_age.labels(*labels).set(committed_age_s(first_ms, now_ms))

    async def _times_at(
        self, consumer: AIOKafkaConsumer, at: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """The timestamp (ms) of the record at each offset of `at`; fetched once per offset."""
        times: dict[TopicPartition, int] = {}
        missing: dict[TopicPartition, int] = {}
        for tp, offset in at.items():
            known = self._record_times.get(tp)
            if known is not None and known[0] == offset:
                times[tp] = known[1]
            else:
                missing[tp] = offset
        if missing:
            fetched = await _first_records(consumer, missing)
            for tp, offset in missing.items():
                if tp in fetched:
                    found_offset, ms = fetched[tp]
                    self._record_times[tp] = (offset, ms) if found_offset == offset else (-1, ms)
                    times[tp] = ms
        return times

    async def _true_end_offsets(
        self, consumer: AIOKafkaConsumer, listed: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        ends: dict[TopicPartition, int] = {}
        moved: dict[TopicPartition, int] = {}
        for tp, end in listed.items():
            known = self._true_ends.get(tp)
            if end <= 0:
                ends[tp] = end
            elif known is not None and known[0] == end:
                ends[tp] = known[1]
            else:
                moved[tp] = end
        if moved:
            last = await _last_offsets(consumer, moved)
            for tp, end in moved.items():
                true_end = max(end, last.get(tp, end - 1) + 1)
                self._true_ends[tp] = (end, true_end)
                ends[tp] = true_end
        return ends


def _position(committed: int | None, start: int) -> int:
    """Where the group reads next: its committed offset, or the first offset when it never committed."""
    return committed if committed is not None and committed >= 0 else start


async def _first_records(
    consumer: AIOKafkaConsumer, at: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int]]:
    """(offset, timestamp ms) of the first record at or after each offset of `at` (a compacted or
    transaction-marker gap skips ahead: then it is not cached as that offset's)."""
    consumer.assign(list(at))
    for tp, offset in at.items():
        consumer.seek(tp, offset)
    found: dict[TopicPartition, tuple[int, int]] = {}
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(END_FETCH_TIMEOUT_S):
            while len(found) < len(at):
                batches = await consumer.getmany(timeout_ms=200, max_records=len(at))
                for tp, records in batches.items():
                    if records and tp not in found:
                        found[tp] = (records[0].offset, records[0].timestamp)
                        consumer.pause(tp)  # one record is enough
    consumer.assign([])
    return found


async def _last_offsets(consumer: AIOKafkaConsumer, listed: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The last offset of each partition's last batch, read from its base offset (listed end − 1)."""
    consumer.assign(list(listed))
    for tp, end in listed.items():
        consumer.seek(tp, end - 1)
    last: dict[TopicPartition, int] = {}
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(END_FETCH_TIMEOUT_S):
            while len(last) < len(listed):
                batches = await consumer.getmany(timeout_ms=200)
                for tp, records in batches.items():
                    if records:
                        last[tp] = max(last.get(tp, -1), records[-1].offset)
                        consumer.pause(tp)  # one batch is enough
    consumer.assign([])
    return last
