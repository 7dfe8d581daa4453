"""BatchCommits: commits only what is decided and acked, one commit at a time, never a lost partition."""

import asyncio
from types import SimpleNamespace

import structlog

from agentstream.kafka.batch_commits import BatchCommits
from tests.unit.lib.recording_consumer import RecordingConsumer

TOPIC = "t.inbound"


def consumer_on(partitions: set[int]) -> RecordingConsumer:
    return RecordingConsumer(TOPIC, partitions)


def records(partition: int, *offsets: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(partition=partition, offset=o) for o in offsets]


def commits_for(consumer: RecordingConsumer | None) -> BatchCommits:
    return BatchCommits(TOPIC, lambda: consumer, structlog.get_logger("test"))


def failed() -> asyncio.Future[None]:
    ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    ack.set_exception(RuntimeError("broker gone"))
    return ack


def acked() -> asyncio.Future[None]:
    ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    ack.set_result(None)
    return ack


async def test_nothing_is_committed_before_its_output_is_acked_nor_past_an_unacked_batch():
    consumer = consumer_on({0})
    commits = commits_for(consumer)
    first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    commits.after_acks([first], records(0, 0, 1, 2))
    commits.after_acks([acked()], records(0, 3, 4))  # the next batch is acked first
    await asyncio.sleep(0.01)
    assert all(c == {0: 0} for c in consumer.commits)  # held at the first batch's first record
    first.set_result(None)
    await commits.flush()
    assert consumer.commits[-1] == {0: 5}


async def test_batches_done_during_a_commit_go_into_the_next_one():
    consumer = consumer_on({0, 1})
    commits = commits_for(consumer)
    consumer.gate.clear()  # the first commit is slow
    commits.after_acks([acked()], records(0, 0, 1, 2))
    await asyncio.sleep(0.01)
    commits.after_acks([acked()], records(1, 5))
    commits.after_acks([acked()], records(0, 3))
    await asyncio.sleep(0.01)
    consumer.gate.set()
    await commits.flush()
    assert consumer.commits == [{0: 3}, {0: 4, 1: 6}]
    await commits.flush()
    assert len(consumer.commits) == 2  # nothing new to commit


async def test_a_batch_whose_output_failed_is_undone_read_again_and_never_committed_past():
    consumer = consumer_on({0})
    commits = commits_for(consumer)
    consumer.positions[0] = 7  # the consumer has handed out records up to offset 6
    undone: list[str] = []
    commits.after_acks([failed()], records(0, 2, 3, 4), undo=lambda: undone.append("batch 2-4"))
    commits.after_acks([acked()], records(0, 5, 6))  # decided before the failure was known
    await commits.flush()
    assert undone == ["batch 2-4"]
    assert consumer.seeks == [(0, 2)]  # read again from the failed batch's first record
    assert all(c[0] <= 2 for c in consumer.commits)  # never past it
    # the re-read: a smaller batch first, then the rest; only now can the commit move on
    commits.after_acks([acked()], records(0, 2, 3))
    await commits.flush()
    commits.after_acks([acked()], records(0, 4, 5, 6))
    await commits.flush()
    assert consumer.commits[-1] == {0: 7}


async def test_a_later_failure_never_seeks_forward_over_a_re_read_in_progress():
    consumer = consumer_on({0})
    commits = commits_for(consumer)
    consumer.positions[0] = 20
    commits.after_acks([failed()], records(0, 0, 1, 2))
    await commits.flush()
    assert consumer.seeks == [(0, 0)]
    consumer.positions[0] = 1  # the re-read has handed out offset 0 only
    commits.after_acks([failed()], records(0, 10, 11))  # a batch decided before the seek, failing too
    await commits.flush()
    assert consumer.seeks == [(0, 0)]  # offset 10 is ahead: the re-read reaches it anyway
    commits.after_acks([acked()], records(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
    await commits.flush()
    assert all(c[0] <= 10 for c in consumer.commits)  # offset 10 is still held
    commits.after_acks([acked()], records(0, 10, 11, 12))
    await commits.flush()
    assert consumer.commits[-1] == {0: 13}


async def test_after_runs_before_the_commit_and_its_failure_does_not_replay_delivered_output():
    consumer = consumer_on({0})
    commits = commits_for(consumer)
    order: list[str] = []

    async def record() -> None:
        order.append(f"recorded, commits so far {len(consumer.commits)}")
        raise ConnectionError("database away")

    commits.after_acks([acked()], records(0, 0), after=record, undo=lambda: order.append("undone"))
    await commits.flush()
    assert order == ["recorded, commits so far 0", "undone"]
    assert consumer.commits == [{0: 1}] and consumer.seeks == []


async def test_a_failed_commit_is_retried_with_the_next_batch():
    consumer = consumer_on({0})
    commits = commits_for(consumer)
    consumer.fail = True
    commits.after_acks([acked()], records(0, 0))
    await commits.flush()
    assert consumer.commits == []
    consumer.fail = False
    commits.after_acks([acked()], records(0, 1))
    await commits.flush()
    assert consumer.commits == [{0: 2}]


async def test_revoked_partitions_are_committed_first_and_then_never_again():
    consumer = consumer_on({0, 1})
    commits = commits_for(consumer)
    commits.after_acks([acked()], records(1, 7))
    await commits.partitions_revoked({1})
    assert consumer.commits == [{1: 8}]
    consumer.partitions = {0}
    commits.after_acks([acked()], records(1, 8) + records(0, 2))  # a batch in flight during the rebalance
    await commits.flush()
    assert consumer.commits == [{1: 8}, {0: 3}]


async def test_nothing_happens_before_the_consumer_exists():
    commits = commits_for(None)
    commits.after_acks([acked()], records(0, 0))
    await commits.flush()
