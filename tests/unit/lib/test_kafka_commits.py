"""CommitPoints (never past a hold) and OffsetCommitter (one round at a time, only assigned partitions)."""

import asyncio

import pytest
import structlog
from aiokafka import TopicPartition

from agentstream.kafka.commits import CommitPoints, OffsetCommitter
from tests.unit.lib.recording_consumer import RecordingConsumer

TOPIC = "t.events"


def consumer_on(partitions: set[int]) -> RecordingConsumer:
    return RecordingConsumer(TOPIC, partitions, also_assigned=[TopicPartition("other", 9)])


def committer_for(consumer: RecordingConsumer | None, **kwargs: object) -> OffsetCommitter:
    return OffsetCommitter(TOPIC, lambda: consumer, structlog.get_logger("test"), **kwargs)  # type: ignore[arg-type]


def test_points_commit_past_everything_read_without_holds() -> None:
    points = CommitPoints()
    points.read(0, 4)
    points.read(0, 2)  # an older record read late never moves the point back
    assert points.due() == {0: 5}
    points.committed({0: 5})
    assert points.due() == {}


def test_points_stop_at_the_oldest_hold_until_released() -> None:
    points = CommitPoints()
    points.hold(0, 3)
    points.hold(0, 3)  # two units opened at one record: both must be released
    points.hold(0, 7)
    points.read(0, 9)
    assert points.due() == {0: 3}
    points.committed({0: 3})
    points.release(0, 3)
    assert points.due() == {}
    points.release(0, 3)
    assert points.due() == {0: 7}


def test_points_stop_at_the_oldest_in_memory_record_named_by_the_owner() -> None:
    points = CommitPoints()
    points.read(1, 10)
    assert points.due(lambda partition: 4 if partition == 1 else None) == {1: 4}


def test_points_forget_revoked_partitions_and_reset_on_a_new_cluster() -> None:
    points = CommitPoints()
    points.read(0, 1)
    points.read(1, 1)
    points.hold(1, 0)
    points.forget({1})
    assert points.due() == {0: 2} and points.oldest_hold(1) is None
    points.reset()
    assert points.due() == {}


async def test_committer_commits_what_is_due_once() -> None:
    consumer = consumer_on({0, 1})
    committer = committer_for(consumer)
    committer.points.read(0, 4)
    committer.points.read(1, 0)
    await committer.commit()
    await committer.commit()
    assert consumer.commits == [{0: 5, 1: 1}]


async def test_committer_respects_the_owners_oldest_in_memory_record() -> None:
    consumer = consumer_on({0})
    committer = committer_for(consumer, oldest_of=lambda partition: 2)
    committer.points.read(0, 8)
    await committer.commit()
    assert consumer.commits == [{0: 2}]


async def test_committer_forgets_partitions_no_longer_assigned() -> None:
    consumer = consumer_on({0})
    committer = committer_for(consumer)
    committer.points.read(0, 1)
    committer.points.read(3, 1)  # moved to another consumer: its owner continues from the last commit
    await committer.commit()
    assert consumer.commits == [{0: 2}]
    assert committer.points.due() == {}


async def test_committer_without_a_consumer_keeps_the_points() -> None:
    committer = committer_for(None)
    committer.points.read(0, 1)
    await committer.commit()
    assert committer.points.due() == {0: 2}


async def test_a_failed_commit_is_left_to_the_next_round() -> None:
    consumer = consumer_on({0})
    consumer.fail = True
    committer = committer_for(consumer)
    committer.points.read(0, 1)
    await committer.commit()
    assert consumer.commits == [] and committer.points.due() == {0: 2}
    consumer.fail = False
    await committer.commit()
    assert consumer.commits == [{0: 2}]


async def test_a_commit_that_never_ends_gives_way_after_its_timeout() -> None:
    """A commit to a lost (or restarted) broker is retried by aiokafka forever; the round must end,
    or the rebalance callback of the next consumer, which commits too, waits on it for good."""
    consumer = consumer_on({0})
    consumer.gate.clear()  # the broker never answers
    committer = committer_for(consumer, timeout_s=0.05)
    committer.points.read(0, 1)
    async with asyncio.timeout(2):
        await committer.commit()
    assert consumer.commits == [] and committer.points.due() == {0: 2}
    consumer.gate.set()
    async with asyncio.timeout(2):
        await committer.flush()  # the lock was given back: the next round commits
    assert consumer.commits == [{0: 2}]


async def test_one_round_at_a_time_and_flush_waits_for_the_background_round() -> None:
    consumer = consumer_on({0})
    consumer.gate.clear()
    committer = committer_for(consumer)
    committer.points.read(0, 1)
    committer.commit_soon()
    committer.commit_soon()  # a round is under way: no second one
    await asyncio.sleep(0)
    committer.points.read(0, 5)  # read while the first commit is in flight
    flushing = asyncio.create_task(committer.flush())
    await asyncio.sleep(0.01)
    assert consumer.commits == [] and not flushing.done()
    consumer.gate.set()
    await flushing
    assert consumer.commits == [{0: 2}, {0: 6}]


async def test_run_commits_every_interval_until_cancelled() -> None:
    consumer = consumer_on({0})
    committer = committer_for(consumer)
    committer.points.read(0, 0)
    loop = asyncio.create_task(committer.run(0.01))
    await asyncio.sleep(0.05)
    committer.points.read(0, 1)
    await asyncio.sleep(0.05)
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop
    assert consumer.commits == [{0: 1}, {0: 2}]
