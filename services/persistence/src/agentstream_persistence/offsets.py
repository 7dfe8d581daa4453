"""Where each partition of `events` may be committed (pure).

Kafka's committed offset is the next record a restarted consumer reads. A partition
may be committed past everything read, except that an unflushed run's events live
only in memory: the commit stops at the first event of the oldest unflushed run read
from that partition. A `kill -9` then loses nothing; a restart re-reads those runs
(and maybe some already flushed ones, whose second flush writes nothing).
"""

from __future__ import annotations

from agentstream_persistence.buffers import BufferSet


class CommitPoints:
    def __init__(self) -> None:
        self._next: dict[int, int] = {}  # partition → offset after the last record read
        self._committed: dict[int, int] = {}

    def read(self, partition: int, offset: int) -> None:
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def due(self, buffers: BufferSet) -> dict[int, int]:
        """partition → offset to commit now (only where it moved forward)."""
        due = {}
        for partition, after_last in self._next.items():
            oldest = buffers.oldest_origin(partition)
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
