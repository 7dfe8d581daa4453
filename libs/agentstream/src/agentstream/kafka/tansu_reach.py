"""What the Tansu flavor's idle workarounds (kafka/tansu_idle.py, kafka/idle.py) reach past the
public API of aiokafka and FastStream. Nothing here is used on Apache Kafka, where no consumer
is gated (kafka/flavor.py); each reach is checked against the real classes by
`tests/unit/lib/test_tansu_reach.py`. Pinned versions: see uv.lock.

- `on_append`: every record the producer queues rings the process's doorbell (and, acknowledged,
  the other processes' on this machine: kafka/near_doorbell.py);
- `poll_when`: a paused subscriber's consume loop waits instead of polling;
- `skip_repeated_commits`: an idle auto-committer sends nothing rather than the same offsets;
- `fetch_positions`: where a consumer stands, read without a request (is it idle?).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


def on_append(
    producer: AIOKafkaProducer, appended: Callable[[str], None], acked: Callable[[str], None] | None = None
) -> None:
    """Call `appended(topic)` whenever a record or batch is queued by `producer` (every path: FastStream's
    publish, `send`, `send_batch`), and `acked(topic)` once the broker acknowledged it. Hooked on the
    accumulator, which `refuse_sends` leaves alone; hooking again replaces the previous hooks."""
    accumulator = producer._message_accumulator
    hooks = (appended, acked)
    if getattr(accumulator, "_agentstream_on_append", None) == hooks:
        return
    add_message, add_batch = type(accumulator).add_message, type(accumulator).add_batch

    def on_ack(topic: str, delivered: asyncio.Future[Any]) -> None:
        if acked is not None and not delivered.cancelled() and delivered.exception() is None:
            acked(topic)

    async def message(tp: Any, *args: Any, **kwargs: Any) -> Any:
        appended(tp.topic)
        delivered = await add_message(accumulator, tp, *args, **kwargs)
        if acked is not None:
            delivered.add_done_callback(functools.partial(on_ack, tp.topic))
        return delivered

    async def batch(builder: Any, tp: Any, *args: Any, **kwargs: Any) -> Any:
        appended(tp.topic)
        delivered = await add_batch(accumulator, builder, tp, *args, **kwargs)
        if acked is not None:
            delivered.add_done_callback(functools.partial(on_ack, tp.topic))
        return delivered

    accumulator.add_message = message
    accumulator.add_batch = batch
    accumulator._agentstream_on_append = hooks


@dataclass(frozen=True)
class FetchPosition:
    """Where a consumer stands on one assigned partition, as of its last fetch response."""

    position: int | None  # next offset handed to the application; None until known
    highwater: int | None  # log end the last fetch response reported; None before one
    polled_ms: int | None  # wall-clock ms of the last fetch response


def fetch_positions(consumer: AIOKafkaConsumer) -> dict[TopicPartition, FetchPosition]:
    """Every assigned partition's `FetchPosition`, read without a request (aiokafka only has an
    async `position`, which may ask the broker)."""
    subscription = consumer._subscription.subscription
    assignment = subscription.assignment if subscription is not None else None
    if assignment is None or not assignment.active:
        return {}
    found = {}
    for tp in assignment.tps:
        state = assignment.state_value(tp)
        position = state.position if state.has_valid_position else None
        found[tp] = FetchPosition(position, state.highwater, state.timestamp)
    return found


def skip_repeated_commits(consumer: AIOKafkaConsumer) -> None:
    """Leave out of each commit the partitions whose offset this consumer already committed
    (a commit with none left sends nothing). aiokafka's auto-commit sends every consumed
    position each interval, moved or not: 10 requests a second for an idle 100 ms committer."""
    coordinator = getattr(consumer, "_coordinator", None)
    commit = getattr(coordinator, "_do_commit_offsets", None)
    if commit is None or getattr(commit, "_agentstream_skips_repeats", False):
        return
    committed: dict[Any, Any] = {}

    async def only_changes(assignment: Any, offsets: dict[Any, Any]) -> Any:
        changed = {tp: offset for tp, offset in offsets.items() if committed.get(tp) != offset}
        if not changed:
            return None
        result = await commit(assignment, changed)
        committed.update(changed)
        return result

    only_changes._agentstream_skips_repeats = True  # type: ignore[attr-defined]
    coordinator._do_commit_offsets = only_changes  # type: ignore[union-attr]


def poll_when(subscriber: Any, ready: Callable[[], Awaitable[object]]) -> None:
    """Make a FastStream subscriber's consume loop await `ready()` before each poll (the last
    call wins; the loop is wrapped once). FastStream's batch loop polls with `batch_timeout_ms`
    and sleeps as long after an empty poll, so a paused consumer still woke the event loop every
    2 × batch_timeout_ms (ingress: 50 times a second) for records that could not come."""
    subscriber.agentstream_poll_when = ready
    if getattr(subscriber, "agentstream_polls_gated", False):
        return
    poll = subscriber.get_msg

    async def get_msg(consumer: AIOKafkaConsumer) -> Any:
        await subscriber.agentstream_poll_when()
        return await poll(consumer)

    subscriber.get_msg = get_msg
    subscriber.agentstream_polls_gated = True
