"""One cheap watcher per process for the paused consumers of every service in it.

A paused consumer (agentstream.kafka.idle) wakes at once for records this process writes, but
a record from another process (`agentstream send`, another deployment's service) is only seen
when someone asks the broker. Instead of each consumer probing with fetches, one client per
process and broker asks for the end offsets of every watched topic (one ListOffsets request, no
record data) and rings the doorbell of each topic whose end moved: every `IdlePacing.watch_hot_s`
for a while after an end moved (a conversation under way), else every `IdlePacing.watch_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection

from aiokafka import AIOKafkaConsumer, TopicPartition

from agentstream.config import KafkaSettings
from agentstream.kafka.idle import DOORBELL, Doorbell, IdlePacing
from agentstream.kafka.internals import refresh_metadata
from agentstream.kafka.security import client_security
from agentstream.observability import get_logger

RETRY_S = 1.0

log = get_logger("agentstream.kafka")


def moved_topics(before: dict[TopicPartition, int], now: dict[TopicPartition, int]) -> set[str]:
    """Topics with a partition whose end differs from the previous reading (a new partition is
    no move: its first reading is the baseline)."""
    return {tp.topic for tp, end in now.items() if tp in before and before[tp] != end}


class EndWatcher:
    """Rings `doorbell` for every watched topic whose end offsets moved; `run` is its task."""

    def __init__(self, kafka: KafkaSettings, pacing: IdlePacing, doorbell: Doorbell = DOORBELL) -> None:
        self.kafka = kafka
        self.pacing = pacing
        self.doorbell = doorbell
        self.topics: Counter[str] = Counter()  # watched topic -> services watching it
        # Watched topics whose records are no one's message (a periodic republish): their moves
        # ring the doorbell but start no `watch_hot_s` spell, else an idle stack never cools down.
        self.background: Counter[str] = Counter()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        while True:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.kafka.bootstrap_servers,
                client_id=f"{self.kafka.client_id}-end-watch",
                group_id=None,
                enable_auto_commit=False,
                **client_security(self.kafka),
            )
            try:
                await consumer.start()
                await self._watch(consumer)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the type only: an exception's text may name hosts
                log.warning("end offsets not read; paused consumers rely on their own probes", error=type(err).__name__)
            finally:
                with contextlib.suppress(Exception):
                    await consumer.stop()
            await asyncio.sleep(RETRY_S)

    async def _watch(self, consumer: AIOKafkaConsumer) -> None:
        before: dict[TopicPartition, int] = {}
        moved_at = -math.inf
        while True:
            tps = [
                TopicPartition(topic, p)
                for topic in sorted(self.topics)
                for p in sorted(consumer.partitions_for_topic(topic) or ())
            ]
            if len({tp.topic for tp in tps}) < len(self.topics):
                await refresh_metadata(consumer)  # the consumer's own partitions (topics() fills a copy)
            if tps:
                now = await consumer.end_offsets(tps)
                for topic in moved_topics(before, now):
                    self.doorbell.ring(topic)
                    if not self.background[topic]:
                        moved_at = time.monotonic()
                before = now
            await asyncio.sleep(self.pacing.watch_interval(time.monotonic() - moved_at) or RETRY_S)


_WATCHERS: dict[str, EndWatcher] = {}


def watch_ends(
    kafka: KafkaSettings, topics: Collection[str], pacing: IdlePacing, background: Collection[str] = ()
) -> Callable[[], Awaitable[None]]:
    """Watch `topics` on `kafka`'s brokers (one watcher per process and broker, paced as its
    first caller's `pacing` says; `background`: those of them whose moves start no hot spell); the
    returned callable stops watching them, and the watcher once nothing is watched."""
    background = [t for t in background if t in topics]
    watcher = _WATCHERS.get(kafka.bootstrap_servers)
    if watcher is None:
        watcher = _WATCHERS[kafka.bootstrap_servers] = EndWatcher(kafka, pacing)
    watcher.topics.update(topics)
    watcher.background.update(background)
    if watcher.task is None:
        watcher.task = asyncio.create_task(watcher.run(), name="kafka-end-watch")

    async def unwatch() -> None:
        watcher.topics.subtract(topics)
        watcher.topics += Counter()  # drops the topics nobody watches any more
        watcher.background.subtract(background)
        watcher.background += Counter()
        if not watcher.topics and watcher.task is not None:
            task, watcher.task = watcher.task, None
            _WATCHERS.pop(kafka.bootstrap_servers, None)
            task.cancel()
            await asyncio.wait({task})

    return unwatch
