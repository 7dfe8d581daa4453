"""Where agentstream reaches past the public API of aiokafka or FastStream, on every broker.

What only the embedded broker's idle workarounds need is beside them, in kafka/tansu_reach.py.
Nothing else in the tree touches a private attribute of either library (or swaps one of
their public attributes behind their back): a library upgrade that renames what is reached
here breaks `tests/unit/lib/test_kafka_internals.py` (and `test_tansu_reach.py`), which
check each reach against the real classes, before it breaks a service. Pinned versions: see uv.lock.

What is here, and why the design needs it: the broker's own producer (`producer_of`, for the
hot paths and the `Publisher`), batches sized for ingress (`record_batch`, `partition_of_key`),
sends refused while Kafka is lost (`refuse_sends`, `restore_sends`, `fail_queued`: the
`OutputGate`), a subscriber's consumer (`consumer_of`, `consumers_of`, `detach_consumer`: the
`Consumer` component's commits and the restart on a new cluster), commits held while Kafka is
lost (`hold_commits`, `release_commits`), a metadata refresh for group-less readers, and a
batch loop that polls again at once (`poll_batches_at_once`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import CommitFailedError
from aiokafka.partitioner import murmur2
from aiokafka.producer.message_accumulator import BatchBuilder
from faststream.exceptions import IncorrectState
from faststream.kafka import KafkaBroker

# The attribute a held consumer keeps its coordinator's auto-commit setting in, until released.
_SAVED_AUTO_COMMIT = "_agentstream_auto_commit"


# -- the producer a FastStream broker owns ------------------------------------------------
def producer_of(broker: KafkaBroker) -> AIOKafkaProducer:
    """The aiokafka producer a started FastStream broker publishes with (hot paths write to it
    directly: FastStream's publish path costs ~3x aiokafka's `send`, see kafka/producer.py)."""
    state = broker.config.producer._producer  # type: ignore[attr-defined]
    try:
        producer = state.producer
    except IncorrectState:  # FastStream's state before `connect` and after `disconnect`
        producer = None
    if not isinstance(producer, AIOKafkaProducer):
        raise RuntimeError("the broker has no running producer")
    return producer


def record_batch(producer: AIOKafkaProducer, min_bytes: int) -> BatchBuilder:
    """What `producer.create_batch()` makes, with room for at least `min_bytes` instead of the
    producer's `max_batch_size` (aiokafka has no public knob for one batch's size)."""
    accumulator = producer._message_accumulator
    if producer._txn_manager is not None or producer._key_serializer or producer._value_serializer:
        return producer.create_batch()  # not how our brokers are built: keep aiokafka's own
    return BatchBuilder(max(accumulator._batch_size, min_bytes), accumulator._compression_type, is_transactional=False)


@lru_cache(maxsize=8192)
def _key_hash(key: bytes) -> int:
    """aiokafka's murmur2 is pure Python (a few microseconds a key); a conversation's key
    comes back with each of its records and for each topic they go to."""
    hashed: int = murmur2(key) & 0x7FFFFFFF
    return hashed


def partition_of_key(key: bytes, partitions: Sequence[int]) -> int:
    """The partition aiokafka's `DefaultPartitioner` gives a keyed record (murmur2 of the key,
    modulo the partition count), for records sent as batches, which skip the partitioner."""
    ordered = sorted(partitions)
    return ordered[_key_hash(key) % len(ordered)]


def refuse_sends(producer: AIOKafkaProducer, error: Callable[[], Exception]) -> None:
    """Make `send`/`send_batch` raise `error()` and a batch whose request failed fail instead of
    being re-queued (aiokafka retries it the moment a broker answers; see kafka/producer.py's
    `OutputGate`). Undone by `restore_sends`."""

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise error()

    producer.send = refused
    producer.send_batch = refused

    def fail_instead_of_retrying(batch: Any) -> None:
        # The batch stays in the accumulator's pending set: the done callback aiokafka attached
        # when it was first taken removes it from there.
        batch.failure(error())

    producer._message_accumulator.reenqueue = fail_instead_of_retrying


def restore_sends(producer: AIOKafkaProducer) -> None:
    """Undo `refuse_sends`: the class's own `send`, `send_batch` and `reenqueue` again."""
    for name in ("send", "send_batch"):
        vars(producer).pop(name, None)
    vars(producer._message_accumulator).pop("reenqueue", None)


def fail_queued(producer: AIOKafkaProducer, error: Exception) -> int:
    """Fail and drop every batch not yet taken by the sender; the number of records failed."""
    accumulator = producer._message_accumulator
    failed = 0
    for tp in list(accumulator._batches):
        for batch in accumulator._batches.pop(tp):
            if batch.retry_count > 0:
                # Taken once and re-queued: its done callback removes it from the pending set.
                accumulator._pending_batches.add(batch)
            failed += batch.record_count
            batch.failure(error)
    return failed


# -- the consumers FastStream subscribers own ---------------------------------------------
def consumer_of(subscriber: Any) -> AIOKafkaConsumer | None:
    """A FastStream Kafka subscriber's aiokafka consumer (None until it started)."""
    consumer: AIOKafkaConsumer | None = getattr(subscriber, "consumer", None)
    return consumer


def consumers_of(subscriber: Any) -> list[AIOKafkaConsumer]:
    """Every aiokafka consumer of a subscriber: its one consumer, or a concurrent one's subgroup."""
    found = [consumer_of(subscriber), *getattr(subscriber, "consumer_subgroup", ())]
    return [c for c in dict.fromkeys(found) if c is not None]


def has_consumer_subgroup(subscriber: Any) -> bool:
    """A subscriber with several consumers (FastStream's concurrent kind), whose `stop` we keep."""
    return bool(getattr(subscriber, "consumer_subgroup", None))


def detach_consumer(subscriber: Any) -> AIOKafkaConsumer | None:
    """Take a subscriber's consumer away, so its `stop` ends only the consume task: a consumer of
    a lost cluster may hang in its own stop, and must not commit on the way out."""
    consumer = consumer_of(subscriber)
    subscriber.consumer = None
    return consumer


# -- commits of a consumer ----------------------------------------------------------------
async def _commits_held(*args: Any, **kwargs: Any) -> None:
    raise CommitFailedError("commits held: kafka was lost and may have come back without our records")


def hold_commits(consumer: Any) -> None:
    """No commit of this consumer reaches Kafka (its own auto-commits included) until
    `release_commits`: the positions it holds may belong to a cluster that is gone."""
    if "commit" in vars(consumer):
        return
    consumer.commit = _commits_held
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is not None and hasattr(coordinator, "_enable_auto_commit"):
        setattr(consumer, _SAVED_AUTO_COMMIT, coordinator._enable_auto_commit)
        coordinator._enable_auto_commit = False


def release_commits(consumer: Any) -> None:
    if "commit" not in vars(consumer):
        return
    del consumer.commit
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is not None and hasattr(consumer, _SAVED_AUTO_COMMIT):
        coordinator._enable_auto_commit = getattr(consumer, _SAVED_AUTO_COMMIT)


async def refresh_metadata(consumer: AIOKafkaConsumer) -> None:
    """Ask the broker for fresh metadata now (a consumer without a group never does by itself
    before its first assignment)."""
    await consumer._client.force_metadata_update()


def poll_batches_at_once(subscriber: Any) -> None:
    """Make a FastStream batch subscriber poll again at once after an empty poll. Its loop sleeps
    `batch_timeout_ms` after one, so a record arriving then waited out the sleep on top of its
    fetch; `getmany` itself waits up to `batch_timeout_ms` for records, so the loop never spins.
    Call it before `poll_when` (which wraps whatever `get_msg` is then)."""

    async def get_msg(consumer: AIOKafkaConsumer) -> tuple[Any, ...]:
        batches = await consumer.getmany(timeout_ms=subscriber.batch_timeout_ms, max_records=subscriber.max_records)
        return tuple(chain.from_iterable(batches.values()))

    subscriber.get_msg = get_msg
