"""Where each partition of `events` may be committed, and the commit itself.

Kafka's committed offset is where a restarted consumer starts reading. delivery may
commit past everything it read, except the streams still being delivered: their state
lives only in memory (the ledger knows what landed, not what is still to come), so a
partition is committed at most up to the first event of its oldest unfinished stream.
After a `kill -9` the restart re-reads those streams from their `run.started`, and the
ledger turns the replay into edits of the messages already posted.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import structlog
from aiokafka import TopicPartition


class CommitPoints:
    def __init__(self) -> None:
        self._next: dict[int, int] = {}  # partition → offset after the last record handled
        self._committed: dict[int, int] = {}
        self._holds: dict[int, Counter[int]] = {}  # partition → first offsets of unfinished streams

    def read(self, partition: int, offset: int) -> None:
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def hold(self, partition: int, offset: int) -> None:
        """A stream opened at this record: the partition may not be committed past it until `release`."""
        self._holds.setdefault(partition, Counter())[offset] += 1

    def release(self, partition: int, offset: int) -> None:
        holds = self._holds.get(partition)
        if holds is not None and holds[offset] > 0:
            holds[offset] -= 1
            if holds[offset] == 0:
                del holds[offset]

    def oldest_hold(self, partition: int) -> int | None:
        return min(self._holds.get(partition) or (), default=None)

    def due(self) -> dict[int, int]:
        """partition → offset to commit now (only where it moved forward)."""
        due = {}
        for partition, after_last in self._next.items():
            oldest = self.oldest_hold(partition)
            point = after_last if oldest is None else min(oldest, after_last)
            if point > self._committed.get(partition, -1):
                due[partition] = point
        return due

    def committed(self, points: dict[int, int]) -> None:
        self._committed.update(points)

    def forget(self, partitions: set[int]) -> None:
        """Revoked partitions: another consumer continues from their committed offsets."""
        for p in partitions:
            self._next.pop(p, None)
            self._committed.pop(p, None)
            self._holds.pop(p, None)


class OffsetCommitter:
    """Commits the due points with the consumer that read the records (set by the handler)."""

    def __init__(self, points: CommitPoints, topic: str, log: structlog.stdlib.BoundLogger) -> None:
        self.points = points
        self.topic = topic
        self.log = log
        self.consumer: Any = None  # the aiokafka consumer of `topic`

    async def run(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            await self.commit()

    async def commit(self) -> None:
        due = self.points.due()
        if not due or self.consumer is None:
            return
        try:
            await self.consumer.commit({TopicPartition(self.topic, p): o for p, o in due.items()})
        except Exception as err:  # a rebalance in progress: the next round catches up
            self.log.warning("offset commit failed", points=due, error=repr(err))
            return
        self.points.committed(due)
