"""Every delivery replica reads all of `web-frames` itself, to serve the web pages connected to it.

No consumer group: the reader assigns itself every partition, so each replica sees every
chat's frames whichever replica delivered the run. It starts `lookback_s` back in time, so
a replica that just started still serves the runs in flight (and the `Last-Event-ID` of a
page that comes over from another replica); it commits nothing — its position only matters
while it runs. A record that is not a `WebFrame` goes to `dlq` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from agentstream.config import KafkaSettings
from agentstream.contracts import WebFrameAdapter
from agentstream.kafka.decoding import describe_validation_error
from agentstream.kafka.end_watch import watch_ends
from agentstream.kafka.flavor import CONSUMER_TIMEOUT_MS, tuning
from agentstream.kafka.idle import IdleFetchGate, IdlePacing
from agentstream.kafka.internals import refresh_metadata
from agentstream.kafka.security import client_security
from agentstream_delivery.adapters.web import FrameId, WebAdapter

LOOKBACK_S = 600.0  # as long as a web chat's messages are kept in memory (`ChatBounds.idle_ttl_s`)
Malformed = Callable[[Any, str], Awaitable[None]]


class WebFramesReader:
    def __init__(
        self,
        kafka: KafkaSettings,
        topic: str,
        adapter: WebAdapter,
        malformed: Malformed,
        log: structlog.stdlib.BoundLogger,
        lookback_s: float = LOOKBACK_S,
    ) -> None:
        self.kafka = kafka
        self.topic = topic
        self.adapter = adapter
        self.malformed = malformed
        self.log = log.bind(topic=topic)
        self.lookback_s = lookback_s
        self.ready = asyncio.Event()  # every partition assigned and positioned
        self.position: dict[int, int] = {}  # partition → offset of the last record read
        self.idle_gate: IdleFetchGate | None = None  # against Tansu: pauses the reader while idle

    async def run(self) -> None:
        """Read until cancelled; a failed consumer is replaced, going on after the last frame read."""
        while True:
            try:
                await self._read_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("web frames reader failed; restarting in 1 s", position=self.position)
                await asyncio.sleep(1.0)

    async def _read_all(self) -> None:
        broker = tuning(self.kafka)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.kafka.bootstrap_servers,
            client_id=f"{self.kafka.client_id}-web-frames",
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=broker.fetch_max_wait_ms,
            consumer_timeout_ms=CONSUMER_TIMEOUT_MS,
            **client_security(self.kafka),
        )
        await consumer.start()
        try:
            await self._position(consumer)
            self.ready.set()
            async with self._paced_when_idle(consumer, broker.idle):
                while True:
                    batches = await consumer.getmany(timeout_ms=1000)
                    for records in batches.values():
                        for record in records:
                            await self._read(record)
        finally:
            await consumer.stop()

    @contextlib.asynccontextmanager
    async def _paced_when_idle(self, consumer: AIOKafkaConsumer, pacing: IdlePacing | None) -> AsyncIterator[None]:
        """Against a broker that does not wake parked fetches (Tansu), the reader pauses once no
        frame came for a while, like the services' own consumers (agentstream.kafka.idle): a
        frame this process publishes rings the doorbell, one from another replica is seen by the
        end-offsets watcher. Without it an idle stack fetched `web-frames` ten times a second."""
        if pacing is None:
            yield
            return
        gate = self.idle_gate = IdleFetchGate(lambda: [consumer], (self.topic,), pacing)
        task = asyncio.create_task(gate.run(), name="web-frames-idle-fetch")
        unwatch = watch_ends(self.kafka, (self.topic,), pacing) if pacing.watch_s is not None else None
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if unwatch is not None:
                await unwatch()

    async def _position(self, consumer: AIOKafkaConsumer) -> None:
        partitions: set[int] | None = None
        for attempt in itertools.count():  # the topic's metadata may lag its creation
            # The consumer's own metadata (topics() fills a copy, and aiokafka's bootstrap request
            # names no topic, which Apache Kafka answers with none).
            await refresh_metadata(consumer)
            partitions = consumer.partitions_for_topic(self.topic)
            if partitions:
                break
            if attempt == 10:
                self.log.warning("topic missing: web pages get no frames until it exists (agentstream topics create)")
            await asyncio.sleep(0.5)
        assert partitions is not None
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        since_ms = int((time.time() - self.lookback_s) * 1000)
        found = await consumer.offsets_for_times(dict.fromkeys(tps, since_ms))
        for tp in tps:
            at = found.get(tp)
            if tp.partition in self.position:  # a restarted reader goes on where the last one stopped
                consumer.seek(tp, self.position[tp.partition] + 1)
            elif at is None:
                await consumer.seek_to_end(tp)  # nothing that recent: only what comes next
            else:
                consumer.seek(tp, at.offset)
        self.log.info("web frames reader assigned", partitions=len(tps), lookback_s=self.lookback_s)

    async def _read(self, record: Any) -> None:
        self.position[record.partition] = record.offset
        try:
            frame = WebFrameAdapter.validate_json(record.value or b"")
        except ValidationError as err:
            await self.malformed(record, f"not a WebFrame: {describe_validation_error(err)}")
            return
        self.adapter.receive(FrameId(record.partition, record.offset), frame)
