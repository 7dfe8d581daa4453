"""The commit of `events` offsets (where: `agentstream.kafka.commits.CommitPoints`).

Kafka's committed offset is where a restarted consumer starts reading. delivery may
commit past everything it read, except the streams still being delivered: their state
lives only in memory (the ledger knows what landed, not what is still to come), so a
partition is committed at most up to the first event of its oldest unfinished stream.
After a `kill -9` the restart re-reads those streams from their `run.started`, and the
ledger turns the replay into edits of the messages already posted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from aiokafka import TopicPartition

from agentstream.kafka.commits import CommitPoints

__all__ = ["CommitPoints", "OffsetCommitter"]


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
