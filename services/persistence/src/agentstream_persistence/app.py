"""persistence service: buffers run events and writes each run once, when it finishes."""

from __future__ import annotations

import asyncio

from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter, Gauge
from pydantic import ValidationError

from agentstream.contracts import RunEventAdapter, RunFinished
from agentstream.db import upgrade
from agentstream.service import Service, describe_validation_error
from agentstream_persistence.api import add_routes
from agentstream_persistence.buffers import BufferSet, Origin, RunBuffer
from agentstream_persistence.flush import write_run
from agentstream_persistence.rows import rows_for

FLUSH_ATTEMPTS = 3


class PersistenceService(Service):
    name = "persistence"
    uses_database = True

    def setup(self) -> None:
        self.buffers = BufferSet()
        self.flushes = Counter("agentstream_persistence_flushes_total", "Run flushes", ["outcome"],
                               registry=self.registry)
        Gauge("agentstream_persistence_open_buffers", "Runs buffered, not yet flushed",
              registry=self.registry).set_function(lambda: len(self.buffers))
        self.broker.subscriber(self.topics.events, **self.subscriber_options())(self.on_event)
        add_routes(self.http, lambda: self.sessions)

    async def on_start(self) -> None:
        await upgrade(self.settings.database.url)  # idempotent: a fresh database just works

    async def on_event(self, msg: KafkaMessage) -> None:
        event = self.decode(msg, RunEventAdapter)
        if isinstance(event, ValidationError):
            await self.dead_letter(msg, "invalid RunEvent: " + describe_validation_error(event))
            return
        raw = msg.raw_message
        partition, offset = getattr(raw, "partition", None), getattr(raw, "offset", None)
        origin = Origin(partition, offset) if partition is not None and offset is not None else None
        buf = self.buffers.add(event, origin)
        if buf is not None and isinstance(event, RunFinished) and event.run_id == event.root_run_id:
            await self.flush(buf)

    async def flush(self, buf: RunBuffer) -> bool:
        """Write the run; on success forget the buffer. A failing database keeps it buffered."""
        rows = rows_for(buf)
        assert self.sessions is not None
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                await write_run(self.sessions, rows)
                break
            except Exception as err:
                self.log.warning("flush failed", root_run_id=buf.root_run_id, attempt=attempt, error=repr(err))
                if attempt == FLUSH_ATTEMPTS:
                    self.flushes.labels("error").inc()
                    return False
                await asyncio.sleep(0.2 * attempt)
        self.buffers.discard(buf.root_run_id)
        self.flushes.labels("ok").inc()
        self.log.info("run flushed", root_run_id=buf.root_run_id, status=rows.run["status"],
                      messages=len(rows.messages))
        return True
