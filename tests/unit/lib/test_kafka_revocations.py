"""RevocationListener: hands moving partitions to the service's callbacks, as partition numbers."""

from aiokafka import ConsumerRebalanceListener, TopicPartition

from agentstream.kafka.revocations import RevocationListener


async def test_revoked_partitions_of_every_topic_reach_the_callback() -> None:
    seen: list[set[int]] = []

    async def revoked(partitions: set[int]) -> None:
        seen.append(partitions)

    listener = RevocationListener(revoked)
    assert isinstance(listener, ConsumerRebalanceListener)
    await listener.on_partitions_revoked({TopicPartition("a", 0), TopicPartition("b", 2)})
    await listener.on_partitions_assigned({TopicPartition("a", 1)})  # nothing asked for it
    assert seen == [{0, 2}]


async def test_only_the_named_topics_partitions_and_assignments_when_asked() -> None:
    revoked_seen: list[set[int]] = []
    assigned_seen: list[set[int]] = []

    async def revoked(partitions: set[int]) -> None:
        revoked_seen.append(partitions)

    async def assigned(partitions: set[int]) -> None:
        assigned_seen.append(partitions)

    listener = RevocationListener(revoked, topic="runs", on_assigned=assigned)
    await listener.on_partitions_revoked({TopicPartition("runs", 0), TopicPartition("tool-results", 1)})
    await listener.on_partitions_assigned({TopicPartition("runs", 3), TopicPartition("tool-results", 3)})
    assert revoked_seen == [{0}] and assigned_seen == [{3}]
