"""Where each partition may be committed: never past state that lives only in memory.

Kafka's committed offset is where a restarted consumer starts reading. A service may
commit past everything it has read, except the records whose effect is still only in
memory (persistence: an unflushed run; delivery: a stream still being delivered): a
partition is committed at most up to the first record of its oldest such unit. After a
`kill -9` the restart re-reads those units, and idempotent writes make the replay safe.

Holds come either from `hold`/`release` (delivery) or from a function passed to `due`
that names the oldest in-memory record of a partition (persistence's buffers).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

OldestOf = Callable[[int], int | None]


class CommitPoints:
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
