"""The per-process end-offsets watcher rings the doorbell of topics that moved."""

from __future__ import annotations

import asyncio
import math

import pytest
from aiokafka import TopicPartition

from agentstream.config import KafkaSettings
from agentstream.kafka.end_watch import EndWatcher, moved_topics
from agentstream.kafka.idle import Doorbell


def kafka_settings() -> KafkaSettings:
    return KafkaSettings(bootstrap_servers="127.0.0.1:1")


def test_only_a_partition_whose_end_moved_rings_its_topic() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    assert moved_topics({a0: 3, a1: 1, b0: 7}, {a0: 3, a1: 2, b0: 7}) == {"a"}
    assert moved_topics({a0: 3}, {a0: 3, b0: 9}) == set()  # a first reading is the baseline
    assert moved_topics({}, {a0: 1}) == set()


class EndsConsumer:
    """What the watcher uses of a consumer: each topic's one partition, whose end moves as scripted."""

    def __init__(self, script: list[dict[str, int]]) -> None:
        self.script = script

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        ends = self.script.pop(0) if self.script else None
        if ends is None:
            raise asyncio.CancelledError  # the script is over: end the watch
        return {tp: ends[tp.topic] for tp in tps}


class Pacing:
    """Records how long ago an end moved each time the watcher asks how long to wait."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def watch_interval(self, since_move_s: float) -> float:
        self.asked.append(since_move_s)
        return 0.0


async def test_a_background_topic_moving_does_not_make_the_watcher_hot() -> None:
    pacing, bell = Pacing(), Doorbell()
    watcher = EndWatcher(kafka_settings(), pacing, bell)  # type: ignore[arg-type]
    watcher.topics.update(["catalog", "inbound"])
    watcher.background.update(["catalog"])
    script = [{"catalog": 1, "inbound": 1}, {"catalog": 2, "inbound": 1}, {"catalog": 2, "inbound": 2}]
    with pytest.raises(asyncio.CancelledError):
        await watcher._watch(EndsConsumer(script))  # type: ignore[arg-type]
    assert bell.rings(["catalog"]) == 1 and bell.rings(["inbound"]) == 1  # both woke their consumers
    assert pacing.asked[:2] == [math.inf, math.inf]  # the catalog's move left it cold
    assert pacing.asked[2] < 1.0  # a message's topic moved: hot
