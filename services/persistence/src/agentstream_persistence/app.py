"""persistence service: buffers run events and writes each run once, when it finishes.

Offsets are committed by hand (FastStream `AckPolicy.MANUAL`, so aiokafka's auto
commit is off): after each flush and each watchdog tick, every partition is committed
up to the first event of its oldest unflushed run (see offsets.py). The watchdog ends
runs lost with their runner and, with `resume.auto`, asks a runner to resume them.

A flush that fails for the database's sake is retried in the background with backoff
until it passes (the run stays buffered, its partition's offset held, `/readyz` false);
meanwhile the consumer keeps buffering other runs. A run that can never be stored goes
to `dlq` and is dropped (see failures.py).
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import ConsumerRebalanceListener, TopicPartition
from faststream import AckPolicy
from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter, Gauge
from pydantic import ValidationError

from agentstream.contracts import RESUMABLE_REASONS, ResumeRun, RunEventAdapter, RunFinished
from agentstream.db import upgrade
from agentstream.kafka.commits import CommitPoints
from agentstream.kafka.decoding import describe_validation_error
from agentstream.kafka.guard import failure_reason
from agentstream.observability import NotReady
from agentstream.redaction import storage_redactor
from agentstream.retention import RetentionTask
from agentstream.service import Service
from agentstream_persistence.api import add_routes
from agentstream_persistence.buffers import BufferSet, BufferState, Origin, RunBuffer
from agentstream_persistence.failures import is_permanent, run_dead_letter
from agentstream_persistence.flush import claim_resume, write_run
from agentstream_persistence.retention import persistence_purges
from agentstream_persistence.rows import rows_for
from agentstream_persistence.watchdog import lost_run_finished

# Backoff of a failing flush: doubled per failed attempt, up to the cap, until it passes.
FLUSH_RETRY_FIRST_S = 0.2
FLUSH_RETRY_MAX_S = 5.0
# One attempt's bound: a database that does not answer is a failed attempt, not a hung consumer.
FLUSH_TIMEOUT_S = 15.0
# Endings that say "the runner went away", not "the run went wrong": with `resume.auto`
# the run continues elsewhere (a killed runner, a moved partition, a stopping service).
AUTO_RESUME_REASONS = RESUMABLE_REASONS


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
        # Finished runs whose flush failed for the database's sake, oldest first; one task retries them.
        self._retry: dict[str, str] = {}  # root run id → the last error
        self._retrier: asyncio.Task[None] | None = None
        self.ready_checks["flush"] = self._flush_ready
        self.flushes = Counter(
            "agentstream_persistence_flushes_total", "Run flushes", ["outcome"], registry=self.registry
        )
        self.lost_runs = Counter(
            "agentstream_persistence_lost_runs_total", "Runs ended by the watchdog", registry=self.registry
        )
        Gauge(
            "agentstream_persistence_open_buffers", "Runs buffered, not yet flushed", registry=self.registry
        ).set_function(lambda: len(self.buffers))
        Gauge(
            "agentstream_persistence_flush_retries", "Finished runs waiting for a flush retry", registry=self.registry
        ).set_function(lambda: len(self._retry))
        self.subscriber = self.broker.subscriber(
            self.topics.events,
            **self.subscriber_options(),
            ack_policy=AckPolicy.MANUAL,
            listener=_Revocations(self),
        )
        self.subscriber(self.on_event)
        add_routes(self.http, lambda: self.sessions)
        self.retention = RetentionTask(persistence_purges, self.settings, self.registry, self.log)

    async def on_start(self) -> None:
        await upgrade(self.settings.database.url)  # idempotent: a fresh database just works
        self._watchdog = asyncio.create_task(self._watch(), name="persistence-watchdog")
        self.retention.start(self.sessions)

    async def on_stop(self) -> None:
        await self.retention.stop()

    async def stop(self) -> None:
        for task in (self._watchdog, self._retrier):
            if task is not None:
                task.cancel()
                await asyncio.wait({task})
        await self.final_step(self.commit(), "final offset commit")
        await super().stop()

    # -- events --------------------------------------------------------------------
    async def on_event(self, msg: KafkaMessage) -> None:
        raw = msg.raw_message
        partition, offset = getattr(raw, "partition", None), getattr(raw, "offset", None)
        origin = Origin(partition, offset) if partition is not None and offset is not None else None
        try:
            event = self.decode(msg, RunEventAdapter)
            if isinstance(event, ValidationError):
                await self.dead_letter(msg, "invalid RunEvent: " + describe_validation_error(event))
            else:
                buf = self.buffers.add(event, origin)
                if buf is not None and isinstance(event, RunFinished) and event.run_id == event.root_run_id:
                    await self.flush(buf)
        finally:
            # Marked read only after the event is in a buffer, flushed or dead-lettered (the
            # handler guard dead-letters what raises here): it is now safe to commit past it
            # unless an unflushed run holds the partition back.
            if origin is not None:
                self.commit_points.read(origin.partition, origin.offset)

    async def flush(self, buf: RunBuffer) -> bool:
        """Write the run once; True when it is done with (stored or dead-lettered). A failing
        database leaves it buffered and queued for the background retry."""
        if self._retry:  # the database is failing: queue behind the runs already waiting
            if buf.root_run_id not in self._retry:
                self._queue_retry(buf.root_run_id, "queued behind runs waiting for the database")
            return False
        return await self._attempt(buf)

    async def _attempt(self, buf: RunBuffer) -> bool:
        try:
            rows = rows_for(buf, self.redactor.redact) if self.redactor else rows_for(buf)
            assert self.sessions is not None
            async with asyncio.timeout(FLUSH_TIMEOUT_S):
                await write_run(self.sessions, rows)
        except Exception as err:
            reason = failure_reason(err)
            if is_permanent(err):
                return await self._give_up(buf, reason)
            self.flushes.labels("error").inc()
            self.log.warning("flush failed; retrying", root_run_id=buf.root_run_id, error=reason)
            self._queue_retry(buf.root_run_id, reason)
            return False
        self._retry.pop(buf.root_run_id, None)
        self.buffers.discard(buf.root_run_id)
        self.flushes.labels("ok").inc()
        self.log.info(
            "run flushed",
            root_run_id=buf.root_run_id,
            status=rows.run["status"],
            reason=rows.run["reason"],
            messages=len(rows.messages),
            resume_steps=len(rows.checkpoint.steps) if rows.checkpoint else 0,
        )
        if rows.run["reason"] in AUTO_RESUME_REASONS and self.settings.resume.auto and not rows.completed:
            try:
                await self.auto_resume(buf)
            except Exception as err:  # the run is stored; its checkpoint lets a user resume it by hand
                self.log.error("resume request failed", root_run_id=buf.root_run_id, error=failure_reason(err))
        await self.commit()
        return True

    async def _give_up(self, buf: RunBuffer, reason: str) -> bool:
        """The run can never be stored: to `dlq` with the reason, then forgotten (the offset moves on)."""
        letter = run_dead_letter(buf, self.topics.events, "run could not be stored: " + reason, self.name)
        try:
            await self.publish(self.topics.dlq, letter, buf.conversation_key)
        except Exception as err:  # not lost: kept and retried like a failing database
            self.log.warning(
                "dead letter of an unstorable run not published; retrying",
                root_run_id=buf.root_run_id,
                error=failure_reason(err),
            )
            self._queue_retry(buf.root_run_id, reason)
            return False
        self._retry.pop(buf.root_run_id, None)
        self.buffers.discard(buf.root_run_id)
        self.flushes.labels("dead_letter").inc()
        self.dead_letters.labels(self.name, self.topics.events).inc()
        self.log.error(
            "run could not be stored; dead-lettered",
            root_run_id=buf.root_run_id,
            topic=letter.source_topic,
            partition=letter.source_partition,
            offset=letter.source_offset,
            error=reason,
        )
        await self.commit()
        return True

    def _queue_retry(self, root_run_id: str, reason: str) -> None:
        self._retry[root_run_id] = reason
        if self._retrier is None or self._retrier.done():
            self._retrier = asyncio.create_task(self._retry_flushes(), name="persistence-flush-retry")

    async def _retry_flushes(self) -> None:
        """Retry the waiting runs, oldest first, backing off while the database keeps failing;
        a pass stops at the first failure (the others would fail the same way)."""
        delay = FLUSH_RETRY_FIRST_S
        while self._retry:
            await asyncio.sleep(delay)
            failed = False
            for root in list(self._retry):
                buf = self.buffers.get(root)
                if buf is None or buf.state is not BufferState.FINISHED:  # revoked, or reopened by a resume
                    self._retry.pop(root, None)
                    continue
                if not await self._attempt(buf):
                    failed = True
                    break
            delay = min(delay * 2, FLUSH_RETRY_MAX_S) if failed else FLUSH_RETRY_FIRST_S

    async def _flush_ready(self) -> bool:
        if self._retry:
            oldest = next(iter(self._retry.values()))  # the one retried first: its error is the latest
            raise NotReady(f"{len(self._retry)} finished run(s) not stored yet, retrying: {oldest}")
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
