"""persistence service: buffers run events and writes each run once, when it finishes.

Offsets are committed by the `OldestOpen` policy (agentstream.kafka.consumer): after each
flush and each watchdog tick, every partition is committed up to the first event of its
oldest unflushed run. The watchdog ends
runs lost with their runner and, with `resume.auto`, asks a runner to resume them.

Neither a flush nor a commit is awaited on the consume path: a finished run goes to a queue that
one writer task flushes in the order the runs ended, every run queued meanwhile in one
transaction (flusher.py falls back to one per run if that fails), and a commit after a flush runs
in the background. While the consumer awaited both for every run (a database transaction and a broker
round trip, ~17 a second at the soak's load), reading `events` was bounded by them and the
committed offset fell further behind (docs/architecture.md § Commits: never past unfinished
work). A run still in the queue is still buffered: its partition's commit stays held at its
first event as before.

A flush that fails for the database's sake is retried in the background with backoff
until it passes (the run stays buffered, its partition's offset held, `/readyz` false);
meanwhile the consumer keeps buffering other runs, which queue behind it and are retried with it,
in batches as the writer writes (one transaction per run did not catch up with the runs still
finishing: a database away for seconds left the commit held at its first waiting run). A run that can never be stored goes
to `dlq` and is dropped (see flusher.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from typing import assert_never

from prometheus_client import Gauge

from agentstream.contracts import RESUMABLE_REASONS, ResumeRun, RunEvent, RunEventAdapter, RunFinished
from agentstream.db import upgrade
from agentstream.kafka.commit_policies import OldestOpen
from agentstream.kafka.consumer import Consumed, Consumer, Contract
from agentstream.kafka.guard import failure_reason
from agentstream.kafka.topics import DLQ, EVENTS, RUNS
from agentstream.retention import RetentionTask
from agentstream.service import Runtime
from agentstream_persistence.api import add_routes
from agentstream_persistence.buffers import BufferSet, BufferState, Origin, RunBuffer
from agentstream_persistence.flusher import (
    FLUSH_RETRY_FIRST_S,
    FLUSH_RETRY_MAX_S,
    Failed,
    Flusher,
    FlushOutcome,
    Stored,
    Unstorable,
    run_dead_letter,
)
from agentstream_persistence.run_writes import claim_resume, stored_runs
from agentstream_persistence.watchdog import lost_run_finished

# Endings that say "the runner went away", not "the run went wrong": with `resume.auto`
# the run continues elsewhere (a killed runner, a moved partition, a stopping service).
AUTO_RESUME_REASONS = RESUMABLE_REASONS
FLUSH_BATCH = 100  # finished runs written in one transaction, at most
STOP_FLUSH_S = 5.0  # on stop, the queued flushes get this long (a run left is re-read after the restart)


class PersistenceService:
    name = "persistence"

    def __init__(
        self,
        runtime: Runtime,
        *,
        buffers: BufferSet,
        flusher: Flusher,
        retention: RetentionTask,
    ) -> None:
        self.runtime = runtime  # its parts and their lifecycle (agentstream.service)
        self.infra = runtime.infra
        self.settings = runtime.settings
        self.topics = runtime.topics
        self.registry = runtime.registry
        self.log = runtime.log
        self.http = runtime.http
        self.sessions = runtime.infra.sessions
        assert self.sessions is not None  # uses_database: built up front, connected lazily
        self.buffers = buffers
        self.flusher = flusher
        self.retention = retention
        self._watchdog: asyncio.Task[None] | None = None
        self._kafka_away = False  # seen away by the watchdog, not yet back
        self._retrier: asyncio.Task[None] | None = None  # retries the flusher's waiting runs
        self._to_flush: dict[str, None] = {}  # root run ids of finished runs, in the order they ended
        self._writer: asyncio.Task[None] | None = None  # flushes `_to_flush`, one run at a time
        runtime.readiness.add("flush", flusher.ready)
        self.lost_runs = runtime.counter(
            "agentstream_persistence_lost_runs_total",
            "Stale runs ended by the watchdog (no event for resume.stale_after_s: the runner was lost)",
        )
        Gauge(
            "agentstream_persistence_open_buffers", "Runs buffered, not yet flushed", registry=self.registry
        ).set_function(lambda: len(self.buffers))
        # Never past the first event of the oldest unflushed run: a restart re-reads what was only in memory.
        self.events = runtime.consuming(
            Consumer(
                runtime.source,
                topic=self.topics.events,
                group=runtime.group_id,
                policy=OldestOpen(oldest_of=buffers.oldest_origin),
                decode=Contract(RunEventAdapter, "RunEvent"),
                handler=self.on_event,
                on_revoked=self.partitions_revoked,
            )
        )
        add_routes(self.http, self.sessions)

    async def start(self) -> None:
        await self.runtime.start(self.on_start)

    async def drain(self, grace_s: float) -> None:
        await self.runtime.drain(grace_s)

    async def on_start(self) -> None:
        await upgrade(self.settings.database.url)  # idempotent: a fresh database just works
        self._watchdog = asyncio.create_task(self._watch(), name="persistence-watchdog")
        self.retention.start(self.sessions)

    async def on_stop(self) -> None:
        await self.retention.stop()

    async def stop(self) -> None:
        if self._writer is not None:  # the runs read to their end are stored before the last commit
            await asyncio.wait({self._writer}, timeout=STOP_FLUSH_S)
        for task in (self._watchdog, self._retrier, self._writer):
            if task is not None:
                task.cancel()
                await asyncio.wait({task})
        await self.runtime.final_step(self.commit(), "final offset commit")
        await self.runtime.stop(self.on_stop)

    # -- events --------------------------------------------------------------------
    async def on_event(self, consumed: Consumed[RunEvent]) -> None:
        """An event into its run's buffer; a root run's ending queues the run's flush. The event counts
        as read once buffered: an unflushed run holds its partition's commit (`buffers.oldest_origin`)."""
        event = consumed.record
        with self.runtime.log_context(event):
            buf = self.buffers.add(event, Origin(consumed.partition, consumed.offset))
            if buf is not None and isinstance(event, RunFinished) and event.run_id == event.root_run_id:
                self.flush_soon(buf)

    def flush_soon(self, buf: RunBuffer) -> None:
        """Queue a finished run for the writer task (started when idle)."""
        self._to_flush[buf.root_run_id] = None
        self.infra.tracing.keep(buf.root_run_id)  # its `persist run` span continues the run.finished record's trace
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._flush_queued(), name="persistence-flush")

    async def _flush_queued(self) -> None:
        """Every run queued so far in one transaction (up to FLUSH_BATCH), until none is left."""
        while self._to_flush:
            roots = list(itertools.islice(self._to_flush, FLUSH_BATCH))
            for root in roots:
                del self._to_flush[root]
            # Not revoked meanwhile, nor reopened by a resume.
            bufs = [b for r in roots if (b := self.buffers.get(r)) is not None and b.state is BufferState.FINISHED]
            try:
                with contextlib.ExitStack() as spans:  # each run's write in the run's own trace
                    for buf in bufs:
                        root = buf.root_run_id
                        spans.enter_context(
                            self.infra.tracing.continuing(root, "persist run", {"agentstream.root_run_id": root})
                        )
                    await self.flush_many(bufs)
            except Exception as err:  # kept buffered (offsets held) and retried like a failing database
                self.log.error("flush raised; retrying", runs=len(bufs), error=failure_reason(err))
                for buf in bufs:
                    if self.buffers.get(buf.root_run_id) is buf:
                        self._queue_retry(buf.root_run_id, failure_reason(err))

    async def flush_many(self, bufs: list[RunBuffer]) -> None:
        """`flush` for several runs: those to write go to the database together."""
        to_write = []
        for buf in bufs:
            if buf.replay or self.flusher.waiting:
                await self.flush(buf)  # a replay is dropped; behind waiting runs it queues
            else:
                to_write.append(buf)
        await self._attempt_many(to_write)

    async def flush(self, buf: RunBuffer) -> bool:
        """Write the run once; True when it is done with (stored or dead-lettered). A failing
        database leaves it buffered and queued for the background retry."""
        if buf.replay:  # a re-projection of a stored run: the original is the record
            self.buffers.done(buf.root_run_id)
            self.log.info("replay delivered, not stored", root_run_id=buf.root_run_id)
            return True
        if self.flusher.waiting:  # the database is failing: queue behind the runs already waiting
            if buf.root_run_id not in self.flusher.waiting:
                self._queue_retry(buf.root_run_id, "queued behind runs waiting for the database")
            return False
        return await self._attempt(buf)

    async def _attempt(self, buf: RunBuffer) -> bool:
        return await self._settle(buf, await self.flusher.attempt(buf))

    async def _settle(self, buf: RunBuffer, outcome: FlushOutcome) -> bool:
        """What follows a flush attempt: the buffer done with and the commit moved, dead-lettered, or retried."""
        match outcome:
            case Stored(rows):
                pass
            case Unstorable(reason):
                return await self._give_up(buf, reason)
            case Failed(reason):
                self.log.warning("flush failed; retrying", root_run_id=buf.root_run_id, error=reason)
                self._queue_retry(buf.root_run_id, reason)
                return False
            case unexpected:
                assert_never(unexpected)
        self.buffers.done(buf.root_run_id)
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
        self.events.commit_soon()
        return True

    async def _give_up(self, buf: RunBuffer, reason: str) -> bool:
        """The run can never be stored: to `dlq` with the reason, then forgotten (the offset moves on)."""
        letter = run_dead_letter(buf, self.topics.events, "run could not be stored: " + reason, self.name)
        try:
            await self.runtime.publish(DLQ, letter)
        except Exception as err:  # not lost: kept and retried like a failing database
            self.log.warning(
                "dead letter of an unstorable run not published; retrying",
                root_run_id=buf.root_run_id,
                error=failure_reason(err),
            )
            self._queue_retry(buf.root_run_id, reason)
            return False
        self.flusher.dead_lettered(buf.root_run_id)
        self.buffers.done(buf.root_run_id)
        self.runtime.count_dead_letter(self.topics.events, letter.error)
        self.log.error(
            "run could not be stored; dead-lettered", root_run_id=buf.root_run_id, **letter.coordinates(), error=reason
        )
        self.events.commit_soon()
        return True

    def _queue_retry(self, root_run_id: str, reason: str) -> None:
        self.flusher.wait(root_run_id, reason)
        if self._retrier is None or self._retrier.done():
            self._retrier = asyncio.create_task(self._retry_flushes(), name="persistence-flush-retry")

    async def _retry_flushes(self) -> None:
        """Retry the waiting runs, oldest first and up to `FLUSH_BATCH` to a transaction, backing off
        while the database keeps failing; a pass stops at the first failed batch (the others would fail
        the same way). In batches, as the writer writes: the runs finishing while the database was away
        wait here too, and one transaction each would not catch up with them."""
        delay, size = FLUSH_RETRY_FIRST_S, FLUSH_BATCH
        waiting = self.flusher.waiting
        while waiting:
            await asyncio.sleep(delay)
            failed = False
            ordered = list(waiting)
            for at in range(0, len(ordered), size):
                bufs = []
                for root in ordered[at : at + size]:
                    buf = self.buffers.get(root)
                    if buf is None or buf.state is not BufferState.FINISHED:  # revoked, or reopened by a resume
                        waiting.pop(root, None)
                    else:
                        bufs.append(buf)
                if not all(await self._attempt_many(bufs)):
                    failed = True
                    break
            # A failed pass halves the batch too: a transaction too big to end within the flush timeout on a
            # busy database (SQLite's one writer) still gets its runs through, down to one a transaction.
            delay = min(delay * 2, FLUSH_RETRY_MAX_S) if failed else FLUSH_RETRY_FIRST_S
            size = max(1, size // 2) if failed else FLUSH_BATCH

    async def _attempt_many(self, bufs: list[RunBuffer]) -> list[bool]:
        """`_attempt` for several runs, written together when they can be."""
        outcomes = await self.flusher.attempt_many(bufs)
        settled = []
        for buf, outcome in zip(bufs, outcomes, strict=True):
            with self.runtime.log_context(buf.finished):
                settled.append(await self._settle(buf, outcome))
        return settled

    # -- offsets -------------------------------------------------------------------
    async def commit(self) -> None:
        await self.events.commit()

    async def partitions_revoked(self, partitions: set[int]) -> None:
        """Commit what is safe, then drop those partitions' buffers: their new owner re-reads them."""
        await self.commit()
        for root in [b.root_run_id for b in self.buffers.from_partitions(partitions)]:
            self.buffers.discard(root)
        self.events.forget(partitions)

    # -- the stale-run watchdog ----------------------------------------------------
    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resume.watchdog_interval_s)
            try:
                await self.watchdog_tick(time.monotonic())
            except Exception as err:  # the watchdog must outlive a bad tick
                self.log.warning("watchdog tick failed", error=repr(err))

    async def watchdog_tick(self, now: float) -> None:
        """End the stale runs, counting silence only while Kafka is heard. While it is away (or the
        consumers restart on a new cluster) no runner's heartbeat can arrive: a run in a long model
        call across a broker restart is alive, and its runner says so within `runner.heartbeat_s`
        of Kafka's return (on a new cluster it publishes the run's `run.started` again)."""
        if not self.runtime.broker_health.ok:
            self._kafka_away = True
            return
        if self._kafka_away:
            self._kafka_away = False
            self.buffers.heard_again(now)
        await self.end_stale_runs(now)
        await self.commit()

    async def end_stale_runs(self, now: float) -> None:
        stale_after = self.settings.resume.stale_after_s
        stale = self.buffers.stale(now, stale_after)
        repeated = await self._stored([b.root_run_id for b in stale if b.started is None and not b.refused])
        for buf in stale:
            if buf.refused:
                self.buffers.done(buf.root_run_id)
                self.log.info("refused run forgotten", root_run_id=buf.root_run_id)
                continue
            if buf.root_run_id in repeated:
                self.buffers.done(buf.root_run_id)
                self.log.info("repeated run.queued of a stored run forgotten", root_run_id=buf.root_run_id)
                continue
            finished = lost_run_finished(buf, stale_after)
            buf.mark_lost()
            try:
                await self.runtime.publish(EVENTS, finished)
            except Exception as err:
                buf.reopen()
                self.log.warning("could not end a lost run", root_run_id=buf.root_run_id, error=repr(err))
                continue
            self.lost_runs.inc()
            self.log.warning("run lost with its runner", root_run_id=buf.root_run_id, silent_s=stale_after)

    async def _stored(self, never_started: list[str]) -> set[str]:
        """Those of the silent runs that never started which are stored already: a run.queued
        that ingress repeated after a crash, read by a process that does not remember the run
        (restarted since; buffers.py recognises it otherwise)."""
        if not never_started:
            return set()
        assert self.sessions is not None  # uses_database
        try:
            return await stored_runs(self.sessions, never_started)
        except Exception as err:  # the database away: they end as lost runs, as before
            self.log.warning("could not look up silent runs", runs=len(never_started), error=failure_reason(err))
            return set()

    async def auto_resume(self, buf: RunBuffer) -> None:
        assert self.sessions is not None  # uses_database
        attempt = await claim_resume(self.sessions, buf.root_run_id, self.settings.resume.max_attempts)
        if attempt is None:
            self.log.warning("not resuming: attempts spent", root_run_id=buf.root_run_id)
            return
        command = ResumeRun(conversation_key=buf.conversation_key, run_id=buf.root_run_id)
        await self.runtime.publish(RUNS, command)
        self.log.info("resume requested", root_run_id=buf.root_run_id, attempt=attempt)
