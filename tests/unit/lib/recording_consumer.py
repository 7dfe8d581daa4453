"""A consumer as the commit helpers (`agentstream.kafka.commits`, `agentstream.kafka.batch_commits`)
use one: its assignment, positions and seeks, and every commit recorded; a commit can be held
(`gate`) or made to fail (`fail`) as a rebalance would."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiokafka import TopicPartition


class RecordingConsumer:
    def __init__(self, topic: str, partitions: set[int], also_assigned: Iterable[TopicPartition] = ()) -> None:
        self.topic = topic
        self.partitions = partitions
        self.also_assigned = set(also_assigned)  # another topic's partitions: never to be committed here
        self.commits: list[dict[int, int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False
        self.positions: dict[int, int] = {}
        self.seeks: list[tuple[int, int]] = []

    async def position(self, tp: TopicPartition) -> int:
        return self.positions.get(tp.partition, 0)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp.partition, offset))
        self.positions[tp.partition] = offset

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(self.topic, p) for p in self.partitions} | self.also_assigned

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("rebalance in progress")
        assert {tp.topic for tp in offsets} == {self.topic}
        self.commits.append({tp.partition: o for tp, o in offsets.items()})
