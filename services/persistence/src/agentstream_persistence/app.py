"""persistence service: buffers run events and writes each run once, when it finishes.

Offsets are committed by hand (FastStream `AckPolicy.MANUAL`, so aiokafka's auto
commit is off): after each flush and each watchdog tick, every partition is committed
up to the first event of its oldest unflushed run (see offsets.py). The watchdog ends
runs lost with their runner and, with `resume.auto`, asks a runner to resume them.
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import ConsumerRebalanceListener, TopicPartition
from faststream import AckPolicy
from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter, Gauge
from pydantic import ValidationError

from agentstream.contracts import ResumeRun, RunEventAdapter, RunFinished
from agentstream.db import upgrade
from agentstream.kafka.offsets import CommitPoints
from agentstream.redaction import storage_redactor
from agentstream.service import Service, describe_validation_error
from agentstream_persistence.api import add_routes
from agentstream_persistence.buffers import BufferSet, Origin, RunBuffer
from agentstream_persistence.flush import claim_resume, write_run
from agentstream_persistence.rows import rows_for
from agentstream_persistence.watchdog import RUNNER_LOST, lost_run_finished

FLUSH_ATTEMPTS = 3
# Endings that say "the runner went away", not "the run went wrong": with `resume.auto`
# the run continues elsewhere (a killed runner, a moved partition, a stopping service).
AUTO_RESUME_REASONS = frozenset({RUNNER_LOST, "rebalanced", "shutdown"})


class _Revocations(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, service: PersistenceService) -> None:
        self._service = service

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._service.partitions_revoked({tp.partition for tp in revoked})

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None


class PersistenceService(Service):
    name = "persistence"
    uses_database = True

    def setup(self) -> None:
        self.buffers = BufferSet()
        self.commit_points = CommitPoints()
        self.redactor = storage_redactor(self.settings)  # None: text is stored raw
        self._watchdog: asyncio.Task[None] | None = None
        self.flushes = Counter("agentstream_persistence_flushes_total", "Run flushes", ["outcome"],
                               registry=self.registry)
        self.lost_runs = Counter("agentstream_persistence_lost_runs_total", "Runs ended by the watchdog",
                                 registry=self.registry)
        Gauge("agentstream_persistence_open_buffers", "Runs buffered, not yet flushed",
              registry=self.registry).set_function(lambda: len(self.buffers))
        self.subscriber = self.broker.subscriber(
            self.topics.events, **self.subscriber_options(), ack_policy=AckPolicy.MANUAL,
            listener=_Revocations(self),
        )
        self.subscriber(self.on_event)
        add_routes(self.http, lambda: self.sessions)

    async def on_start(self) -> None:
        await upgrade(self.settings.database.url)  # idempotent: a fresh database just works
        self._watchdog = asyncio.create_task(self._watch(), name="persistence-watchdog")

    async def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.wait({self._watchdog})
        await self.final_step(self.commit(), "final offset commit")
        await super().stop()

    # -- events --------------------------------------------------------------------
    async def on_event(self, msg: KafkaMessage) -> None:
        raw = msg.raw_message
        partition, offset = getattr(raw, "partition", None), getattr(raw, "offset", None)
        origin = Origin(partition, offset) if partition is not None and offset is not None else None
        event = self.decode(msg, RunEventAdapter)
        if isinstance(event, ValidationError):
            await self.dead_letter(msg, "invalid RunEvent: " + describe_validation_error(event))
        else:
            buf = self.buffers.add(event, origin)
            if buf is not None and isinstance(event, RunFinished) and event.run_id == event.root_run_id:
                await self.flush(buf)
        # Marked read only after the event is in a buffer (or flushed): it is now safe to
        # commit past it unless an unflushed run holds the partition back.
        if origin is not None:
            self.commit_points.read(origin.partition, origin.offset)

    async def flush(self, buf: RunBuffer) -> bool:
        """Write the run; on success forget the buffer. A failing database keeps it buffered."""
        rows = rows_for(buf, self.redactor.redact) if self.redactor else rows_for(buf)
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
                      reason=rows.run["reason"], messages=len(rows.messages),
                      resume_steps=len(rows.checkpoint.steps) if rows.checkpoint else 0)
        if rows.run["reason"] in AUTO_RESUME_REASONS and self.settings.resume.auto and not rows.completed:
            await self.auto_resume(buf)
        await self.commit()
        return True

    # -- offsets -------------------------------------------------------------------
    async def commit(self) -> None:
        consumer = getattr(self.subscriber, "consumer", None)
        due = self.commit_points.due(self.buffers.oldest_origin)
        if consumer is None or not due:
            return
        try:
            await consumer.commit({TopicPartition(self.topics.events, p): o for p, o in due.items()})
        except Exception as err:  # a rebalance in progress: the next commit catches up
            self.log.warning("offset commit failed", points=due, error=repr(err))
            return
        self.commit_points.committed(due)

    async def partitions_revoked(self, partitions: set[int]) -> None:
        """Commit what is safe, then drop those partitions' buffers: their new owner re-reads them."""
        await self.commit()
        for root in [b.root_run_id for b in self.buffers.from_partitions(partitions)]:
            self.buffers.discard(root)
        self.commit_points.forget(partitions)

    # -- the stale-run watchdog ----------------------------------------------------
    async def _watch(self) -> None:
        resume = self.settings.resume
        while True:
            await asyncio.sleep(resume.watchdog_interval_s)
            try:
                await self.end_stale_runs(time.monotonic())
                await self.commit()
            except Exception as err:  # the watchdog must outlive a bad tick
                self.log.warning("watchdog tick failed", error=repr(err))

    async def end_stale_runs(self, now: float) -> None:
        stale_after = self.settings.resume.stale_after_s
        for buf in self.buffers.stale(now, stale_after):
            if buf.refused:
                self.buffers.discard(buf.root_run_id)
                self.log.info("refused run forgotten", root_run_id=buf.root_run_id)
                continue
            finished = lost_run_finished(buf, stale_after)
            buf.mark_lost()
            try:
                await self.publish(self.topics.events, finished, buf.conversation_key)
            except Exception as err:
                buf.reopen()
                self.log.warning("could not end a lost run", root_run_id=buf.root_run_id, error=repr(err))
                continue
            self.lost_runs.inc()
            self.log.warning("run lost with its runner", root_run_id=buf.root_run_id, silent_s=stale_after)

    async def auto_resume(self, buf: RunBuffer) -> None:
        assert self.sessions is not None
        attempt = await claim_resume(self.sessions, buf.root_run_id, self.settings.resume.max_attempts)
        if attempt is None:
            self.log.warning("not resuming: attempts spent", root_run_id=buf.root_run_id)
            return
        command = ResumeRun(conversation_key=buf.conversation_key, run_id=buf.root_run_id)
        await self.publish(self.topics.runs, command, buf.conversation_key)
        self.log.info("resume requested", root_run_id=buf.root_run_id, attempt=attempt)
