"""`inbound` offsets of a batch, committed once its output is acked, behind the handler
(the `AfterOutputAcked` commit policy, kafka/commit_policies.py).

The handler hands a batch's output to the producer and returns: it waits neither for
the broker's acks nor for a commit round trip, so the next batch is decided while this
one's output is on its way. A batch holds its partitions' commit point at its first
record until all its output is acked (and its dedupe rows recorded, `after`); a background
task commits what is no longer held (one commit in flight; batches finished meanwhile go
into the next one; `agentstream.kafka.commits.OffsetCommitter`). So nothing is committed before its output is in Kafka. A partition
being revoked, and the service stopping, first wait for the output in flight and commit
what is done.

A batch whose output failed is read again: its dedupe claims are dropped (`undo`), its
hold stays until the batch that re-reads its first record is handed over, and the
consumer seeks back to that record (only backwards: a re-read already under way reaches
it anyway). Its records are then decided again, as if never seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from aiokafka import TopicPartition

from agentstream.kafka.commits import OffsetCommitter


class Positioned(Protocol):
    """Where a record was read (an aiokafka `ConsumerRecord`, a `Consumed`)."""

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...


class BatchCommits:
    """Holds each batch's partitions until its output is acked; rewinds a batch whose output failed."""

    def __init__(self, topic: str, consumer: Callable[[], Any], log: Any) -> None:
        self.topic = topic
        self.log = log
        self.committer = OffsetCommitter(topic, consumer, log, on_forget=self._forget_rewound)
        self.points = self.committer.points
        self._in_flight: set[asyncio.Task[None]] = set()
        self._rewound: dict[int, set[int]] = {}  # partition → first offsets of failed batches not re-read yet

    def after_acks(
        self,
        acks: Sequence[asyncio.Future[Any]],
        records: Sequence[Positioned],
        after: Callable[[], Awaitable[None]] | None = None,
        undo: Callable[[], None] | None = None,
    ) -> None:
        """`records` are decided and their output handed over as `acks`: commit them once acked
        and `after` has run; if the output fails, `undo` runs and the records are read again."""
        firsts: dict[int, int] = {}
        lasts: dict[int, int] = {}
        for record in records:
            firsts.setdefault(record.partition, record.offset)
            lasts[record.partition] = record.offset
        for partition, offset in firsts.items():
            self.points.read(partition, lasts[partition])  # a partition's records come in offset order
            self.points.hold(partition, offset)
            self._reread(partition, offset, lasts[partition])
        task = asyncio.create_task(
            self._release_when_acked(acks, firsts, after, undo), name=f"output-acks-{self.topic}"
        )
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    def _reread(self, partition: int, first: int, last: int) -> None:
        """A batch that covers a failed batch's first record holds the partition from now on."""
        rewound = self._rewound.get(partition)
        for offset in [o for o in rewound or () if first <= o <= last]:
            assert rewound is not None
            rewound.discard(offset)
            self.points.release(partition, offset)

    async def _release_when_acked(
        self,
        acks: Sequence[asyncio.Future[Any]],
        firsts: dict[int, int],
        after: Callable[[], Awaitable[None]] | None,
        undo: Callable[[], None] | None,
    ) -> None:
        try:
            await asyncio.gather(*acks)
        except Exception as err:
            # The producer gave up after its retries: nothing of this batch may count as done.
            self.log.error("batch output not acked: the batch is read again", partitions=firsts, error=repr(err))
            if undo is not None:
                undo()
            await self._rewind(firsts)
            return
        try:
            if after is not None:
                await after()
        except Exception as err:  # the output is in Kafka: re-reading would repeat it
            self.log.error("dedupe rows of a delivered batch not recorded", partitions=firsts, error=repr(err))
            if undo is not None:
                undo()
        for partition, offset in firsts.items():
            self.points.release(partition, offset)
        self.committer.commit_soon()

    async def _rewind(self, firsts: dict[int, int]) -> None:
        """Keep the failed batch's holds and seek back to its first records."""
        consumer = self.committer.consumer()
        assigned = {tp.partition for tp in consumer.assignment() if tp.topic == self.topic} if consumer else set()
        for partition, offset in firsts.items():
            if partition not in assigned:  # moved away: its new owner reads from the last commit
                self.points.release(partition, offset)
                continue
            self._rewound.setdefault(partition, set()).add(offset)
            tp = TopicPartition(self.topic, partition)
            try:
                if await consumer.position(tp) > offset:
                    consumer.seek(tp, offset)
            except Exception as err:  # e.g. revoked meanwhile: the last commit is before the batch
                self.log.warning(
                    "could not seek back to a failed batch", partition=partition, offset=offset, error=repr(err)
                )

    async def flush(self) -> None:
        """Wait for the output in flight, then commit everything done, and wait for that."""
        if self._in_flight:
            await asyncio.wait(set(self._in_flight))
        await self.committer.flush()

    async def partitions_revoked(self, partitions: set[int]) -> None:
        """Before partitions move to another consumer, commit what was done with them."""
        await self.flush()
        self.committer.forget(partitions)

    def _forget_rewound(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._rewound.pop(partition, None)
