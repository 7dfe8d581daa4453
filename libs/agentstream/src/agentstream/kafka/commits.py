"""Offset commits, one way for every service: never past state that lives only in memory.

Kafka's committed offset is where a restarted consumer starts reading. A service may
commit past everything it has read, except the records whose effect is still only in
memory (persistence: an unflushed run; delivery: a stream still being delivered): a
partition is committed at most up to the first record of its oldest such unit. After a
`kill -9` the restart re-reads those units, and idempotent writes make the replay safe.

Holds come either from `hold`/`release` (delivery) or from a function passed to `due`
that names the oldest in-memory record of a partition (persistence's buffers).
`OffsetCommitter` commits the points with the consumer that read the records.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiokafka import TopicPartition

OldestOf = Callable[[int], int | None]

# aiokafka retries a commit's retriable errors forever: against a lost broker, or a restarted
# one whose coordinator answers "not available", a round would never end and would hold the
# lock that a rebalance callback (a new consumer's first join included) waits for.
COMMIT_TIMEOUT_S = 5.0


class CommitPoints:
    """Per partition: the offset after the last record read, what was committed, and the holds."""

    def __init__(self) -> None:
        self._next: dict[int, int] = {}  # partition → offset after the last record read
        self._committed: dict[int, int] = {}
        self._holds: dict[int, Counter[int]] = {}  # partition → first offsets of in-memory units

    def read(self, partition: int, offset: int) -> None:
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def hold(self, partition: int, offset: int) -> None:
        """A unit opened at this record: no commit past it until `release`."""
        self._holds.setdefault(partition, Counter())[offset] += 1

    def release(self, partition: int, offset: int) -> None:
        holds = self._holds.get(partition)
        if holds is not None and holds[offset] > 0:
            holds[offset] -= 1
            if holds[offset] == 0:
                del holds[offset]

    def oldest_hold(self, partition: int) -> int | None:
        return min(self._holds.get(partition) or (), default=None)

    def due(self, oldest_of: OldestOf | None = None) -> dict[int, int]:
        """partition → offset to commit now (only where it moved forward)."""
        due = {}
        for partition, after_last in self._next.items():
            holds = [self.oldest_hold(partition), oldest_of(partition) if oldest_of else None]
            point = min([after_last, *(h for h in holds if h is not None)])
            if point > self._committed.get(partition, -1):
                due[partition] = point
        return due

    def committed(self, points: dict[int, int]) -> None:
        self._committed.update(points)

    def reset(self) -> None:
        """The broker lost its records (a new cluster): offsets read before mean nothing now."""
        self._next.clear()
        self._committed.clear()
        self._holds.clear()

    def forget(self, partitions: set[int]) -> None:
        """Revoked partitions: another consumer continues from their committed offsets."""
        for p in partitions:
            self._next.pop(p, None)
            self._committed.pop(p, None)
            self._holds.pop(p, None)


class OffsetCommitter:
    """Commits one topic's `CommitPoints` with the consumer that reads it.

    One commit at a time (a lock): a round commits every partition due, forgetting those no
    longer assigned to this consumer (their new owner continues from the last commit). A
    failed commit (e.g. a rebalance in progress) is logged and left to the next round, and so
    is one that takes longer than `timeout_s`. Rounds come from the owner (`commit`,
    `commit_soon`) or from a periodic loop (`run`).
    """

    def __init__(
        self,
        topic: str,
        consumer: Callable[[], Any],
        log: Any,
        oldest_of: OldestOf | None = None,
        on_forget: Callable[[set[int]], None] | None = None,
        timeout_s: float = COMMIT_TIMEOUT_S,
    ) -> None:
        self.topic = topic
        self.timeout_s = timeout_s
        self.consumer = consumer  # the aiokafka consumer of `topic` now; None before it started
        self.log = log
        self.oldest_of = oldest_of  # in-memory units held outside `points` (persistence's buffers)
        self.points = CommitPoints()
        self._lock = asyncio.Lock()
        self._soon: asyncio.Task[None] | None = None
        self.on_forget = on_forget  # the owner drops its own state of partitions that moved away

    async def commit(self) -> None:
        """Commit what is due now, after the round in progress."""
        async with self._lock:
            while due := self.points.due(self.oldest_of):
                consumer = self.consumer()
                if consumer is None:
                    return
                assigned = {tp.partition for tp in consumer.assignment() if tp.topic == self.topic}
                if gone := set(due) - assigned:  # moved away: the new owner continues from the last commit
                    self.forget(gone)
                    continue
                try:
                    async with asyncio.timeout(self.timeout_s):
                        await consumer.commit({TopicPartition(self.topic, p): offset for p, offset in due.items()})
                except Exception as err:  # a rebalance in progress, a lost broker: the next round commits again
                    self.log.warning("offset commit failed", topic=self.topic, points=due, error=repr(err))
                    return
                self.points.committed(due)

    def commit_soon(self) -> None:
        """A round in the background, unless one is waiting already (it will see these points)."""
        if self._soon is None or self._soon.done():
            self._soon = asyncio.create_task(self.commit(), name=f"commit-{self.topic}")

    async def run(self, every_s: float) -> None:
        """A round every `every_s` until cancelled."""
        while True:
            await asyncio.sleep(every_s)
            await self.commit()

    async def flush(self) -> None:
        """Wait for the background round, then commit what is due (a revocation, a stop)."""
        if self._soon is not None:
            await asyncio.wait({self._soon})
        await self.commit()

    def forget(self, partitions: set[int]) -> None:
        """Revoked partitions: another consumer continues from their committed offsets."""
        self.points.forget(partitions)
        if self.on_forget is not None:
            self.on_forget(partitions)
