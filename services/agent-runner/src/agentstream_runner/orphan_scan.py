"""Reading what `orphans.py` decides on: the `events` partitions of newly assigned `runs` partitions,
and what of those `runs` partitions this runner has still to read.

`events` is read from persistence's committed offsets — persistence commits no further than the
first event of its oldest run not yet stored, so every run still open starts at or after them — up
to the partitions' end when they were assigned; `runs` from this runner's group's committed offsets
(a command read but not committed by a runner that died is read again, and runs again). The
assignment callback awaits this, before this runner reads anything of those partitions, so no run
of its own is among what it reads.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from agentstream.config import KafkaSettings
from agentstream.contracts import RunEvent, RunEventAdapter
from agentstream.kafka.flavor import BrokerTuning, tuning
from agentstream.kafka.internals import refresh_metadata
from agentstream.kafka.security import client_security
from agentstream.kafka.topics import consumer_group

PERSISTENCE = "persistence"  # the service whose committed offsets bound the read


def _consumer(kafka: KafkaSettings, client_id: str, group: str | None) -> AIOKafkaConsumer:
    # A group id only to read the group's committed offsets: this consumer never joins it.
    return AIOKafkaConsumer(
        bootstrap_servers=kafka.bootstrap_servers,
        client_id=client_id,
        group_id=group,
        enable_auto_commit=False,
        fetch_max_wait_ms=tuning(kafka).fetch_max_wait_ms,
        **client_security(kafka),
    )


async def read_events(kafka: KafkaSettings, topic: str, partitions: set[int], client_id: str) -> list[RunEvent]:
    """The events of `partitions` of `topic` from persistence's committed offsets to their end now."""
    events: list[RunEvent] = []
    for value in await read_committed_to_end(kafka, topic, partitions, consumer_group(kafka, PERSISTENCE), client_id):
        try:
            events.append(RunEventAdapter.validate_json(value))
        except ValidationError:
            continue  # persistence dead-letters it; it opens or ends no run
    return events


async def read_committed_to_end(
    kafka: KafkaSettings, topic: str, partitions: set[int], group_id: str, client_id: str
) -> list[bytes]:
    """The record values of `partitions` of `topic` from `group_id`'s committed offsets (the first
    offset where it never committed) to their end now."""
    if not partitions:
        return []
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    reader = _consumer(kafka, client_id, None)
    group = _consumer(kafka, client_id, group_id)
    await reader.start()
    try:
        await group.start()
        try:
            committed = await asyncio.gather(*(group.committed(tp) for tp in tps))
        finally:
            with contextlib.suppress(Exception):
                await group.stop()
        await refresh_metadata(reader)
        reader.assign(tps)
        ends = await reader.end_offsets(tps)
        starts = await reader.beginning_offsets(tps)
        for tp, offset in zip(tps, committed, strict=True):
            reader.seek(tp, max(offset, starts[tp]) if offset is not None and offset >= 0 else starts[tp])
        return await _read_to(reader, ends, tuning(kafka))
    finally:
        with contextlib.suppress(Exception):
            await reader.stop()


async def _read_to(reader: AIOKafkaConsumer, ends: dict[TopicPartition, int], broker: BrokerTuning) -> list[bytes]:
    values: list[bytes] = []
    while [tp for tp in ends if await reader.position(tp) < ends[tp]]:
        batch = await reader.getmany(timeout_ms=200)
        for tp, records in batch.items():
            values.extend(r.value for r in records if r.value and broker.within_end(r.offset, ends[tp]))
    return values
