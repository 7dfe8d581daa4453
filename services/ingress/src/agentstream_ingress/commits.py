"""`inbound` offsets, committed behind the handler instead of in its path.

The handler hands a batch's output to the producer and returns: it waits neither for
the broker's acks nor for a commit round trip, so the next batch is decided while this
one's output is on its way. A batch holds its partitions' commit point at its first
record until all its output is acked; a background task commits what is no longer held
(one commit in flight; batches finished meanwhile go into the next one). So nothing is
committed before its output is in Kafka. A partition being revoked, and the service
stopping, first wait for the output in flight and commit what is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import ConsumerRebalanceListener, ConsumerRecord, TopicPartition

from agentstream.kafka.offsets import CommitPoints


class BackgroundCommits:
    def __init__(self, topic: str, consumer: Callable[[], Any], log: Any) -> None:
        self.topic = topic
        self.consumer = consumer  # the subscriber's aiokafka consumer, None before it started
        self.log = log
        self.points = CommitPoints()
        self._task: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[None]] = set()

    def after_acks(self, acks: Sequence[asyncio.Future[Any]], records: Sequence[ConsumerRecord]) -> None:
        """`records` are decided and their output handed over as `acks`: commit them once acked."""
        firsts: dict[int, int] = {}
        for record in records:
            firsts.setdefault(record.partition, record.offset)
            self.points.read(record.partition, record.offset)
        for partition, offset in firsts.items():
            self.points.hold(partition, offset)
        task = asyncio.create_task(self._release_when_acked(acks, firsts), name="ingress-output-acks")
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _release_when_acked(self, acks: Sequence[asyncio.Future[Any]], firsts: dict[int, int]) -> None:
        try:
            await asyncio.gather(*acks)
        except Exception as err:
            # The producer gave up after its retries. The records' decisions are recorded
            # (dedupe), so re-reading them would only drop them: let the commit move on.
            self.log.error("batch output not acked", partitions=firsts, error=repr(err))
        finally:
            for partition, offset in firsts.items():
                self.points.release(partition, offset)
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._commit_due(), name="ingress-commits")

    async def flush(self) -> None:
        """Wait for the output in flight, then commit everything done, and wait for that."""
        if self._in_flight:
            await asyncio.wait(set(self._in_flight))
        if self._task is not None:
            await asyncio.wait({self._task})
        await self._commit_due()

    def forget(self, partitions: set[int]) -> None:
        self.points.forget(partitions)

    async def _commit_due(self) -> None:
        while due := self.points.due():
            consumer = self.consumer()
            if consumer is None:
                return
            # A batch handled while its partition moved elsewhere: the new owner continues from
            # the last commit (and dedupe drops what this consumer already decided).
            assigned = {tp.partition for tp in consumer.assignment() if tp.topic == self.topic}
            if gone := set(due) - assigned:
                self.points.forget(gone)
                continue
            try:
                await consumer.commit({TopicPartition(self.topic, p): offset for p, offset in due.items()})
            except Exception as err:  # e.g. a rebalance in progress: the next batch commits again
                self.log.warning("offset commit failed", points=due, error=repr(err))
                return
            self.points.committed(due)


class CommitOnRevoke(ConsumerRebalanceListener):  # type: ignore[misc]
    """Before partitions move to another consumer, commit what was done with them."""

    def __init__(self, commits: BackgroundCommits) -> None:
        self.commits = commits

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.commits.flush()
        self.commits.forget({tp.partition for tp in revoked})

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None
