"""The per-process end-offsets watcher rings the doorbell of topics that moved."""

from __future__ import annotations

from aiokafka import TopicPartition

from agentstream.kafka.end_watch import moved_topics


def test_only_a_partition_whose_end_moved_rings_its_topic() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    assert moved_topics({a0: 3, a1: 1, b0: 7}, {a0: 3, a1: 2, b0: 7}) == {"a"}
    assert moved_topics({a0: 3}, {a0: 3, b0: 9}) == set()  # a first reading is the baseline
    assert moved_topics({}, {a0: 1}) == set()
