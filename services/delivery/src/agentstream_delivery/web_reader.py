"""Every delivery replica reads all of `web-frames` itself, to serve the web pages connected to it.

No consumer group: the reader assigns itself every partition, so each replica sees every
chat's frames whichever replica delivered the run. It starts `lookback_s` back in time, so
a replica that just started still serves the runs in flight (and the `Last-Event-ID` of a
page that comes over from another replica); it commits nothing — its position only matters
while it runs. A record that is not a `WebFrame` goes to `dlq` with the reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from agentstream.config import KafkaSettings
from agentstream.contracts import WebFrameAdapter
from agentstream.kafka.decoding import describe_validation_error
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

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.kafka.bootstrap_servers,
            client_id=f"{self.kafka.client_id}-web-frames",
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            **client_security(self.kafka),
        )
        await consumer.start()
        try:
            await self._position(consumer)
            self.ready.set()
            while True:
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    for record in records:
                        await self._read(record)
        finally:
            await consumer.stop()

    async def _position(self, consumer: AIOKafkaConsumer) -> None:
        partitions: set[int] | None = None
        while not partitions:  # the topic's metadata may lag its creation
            await consumer.topics()
            partitions = consumer.partitions_for_topic(self.topic)
            if not partitions:
                await asyncio.sleep(0.5)
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        since_ms = int((time.time() - self.lookback_s) * 1000)
        found = await consumer.offsets_for_times(dict.fromkeys(tps, since_ms))
        for tp in tps:
            at = found.get(tp)
            if at is None:
                await consumer.seek_to_end(tp)  # nothing that recent: only what comes next
            else:
                consumer.seek(tp, at.offset)
        self.log.info("web frames reader assigned", partitions=len(tps), lookback_s=self.lookback_s)

    async def _read(self, record: Any) -> None:
        try:
            frame = WebFrameAdapter.validate_json(record.value or b"")
        except ValidationError as err:
            await self.malformed(record, f"not a WebFrame: {describe_validation_error(err)}")
            return
        self.adapter.receive(FrameId(record.partition, record.offset), frame)
