"""The rebalance listener every service gives its subscriber: partitions moving away (and,
if asked, arriving) are handed to the service's own async callbacks, as partition numbers.

aiokafka awaits `on_partitions_revoked` before the partitions move to another consumer: it is
the last moment to commit what was done with them, or to end what runs for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiokafka import ConsumerRebalanceListener, TopicPartition

OnPartitions = Callable[[set[int]], Awaitable[None]]


class RevocationListener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Calls `on_revoked` (and `on_assigned`) with the partitions of `topic`, or of every topic
    the subscriber reads when `topic` is None."""

    def __init__(
        self, on_revoked: OnPartitions, *, topic: str | None = None, on_assigned: OnPartitions | None = None
    ) -> None:
        self.on_revoked = on_revoked
        self.on_assigned = on_assigned
        self.topic = topic

    def _partitions(self, tps: set[TopicPartition]) -> set[int]:
        return {tp.partition for tp in tps if self.topic is None or tp.topic == self.topic}

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.on_revoked(self._partitions(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if self.on_assigned is not None:
            await self.on_assigned(self._partitions(assigned))
