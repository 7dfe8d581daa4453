"""Writing finished runs: one attempt at a time, under a timeout, and what a failure means.

An attempt ends `Stored`, `Unstorable` or `Failed`. A *transient* failure (the database unreachable, a connection dropped, a timeout) is
retried until it passes: the run stays buffered and its partition's offset stays held.
A *permanent* one is the run's own fault (a value its column cannot hold, a row that
breaks a constraint, data rows.py cannot turn into rows): retrying would hold the offset
forever, so the run is dead-lettered and dropped (`run_dead_letter`). The runs waiting for a
retry are kept here, oldest first; the service retries them with `FLUSH_RETRY_*` backoff.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, StatementError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import DeadLetter
from agentstream.kafka.guard import failure_reason
from agentstream.observability import NotReady
from agentstream_persistence.buffers import RunBuffer
from agentstream_persistence.rows import FlushRows, Redact, keep, rows_for
from agentstream_persistence.run_writes import write_run, write_runs

# Backoff of a failing flush: doubled per failed attempt, up to the cap, until it passes.
FLUSH_RETRY_FIRST_S = 0.2
FLUSH_RETRY_MAX_S = 5.0
# One attempt's bound: a database that does not answer is a failed attempt, not a hung consumer.
FLUSH_TIMEOUT_S = 15.0
FLUSH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15)

# A dead letter must fit in one Kafka record: past this, the events are listed, not copied
# (they are still in `events` from `source_offset` on, as long as its retention keeps them).
MAX_LETTER_CHARS = 256 * 1024
# The run's own data: the same rows fail the same way on every attempt.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (DataError, IntegrityError, RecursionError, ValueError, TypeError)


def is_permanent(err: BaseException) -> bool:
    if isinstance(err, PERMANENT_ERRORS):
        return True
    if isinstance(err, DBAPIError):  # operational, interface, …: the database, not the data
        return False
    # A value the driver could not even bind (SQLAlchemy's own wrapper, no database involved).
    return isinstance(err, StatementError)


def buffered_events(buf: RunBuffer) -> list[Any]:
    """Every event the buffer kept, in stream order."""
    events: list[Any] = [e for e in (buf.queued, buf.started) if e is not None]
    events += buf.assistant
    for exchange in buf.tools:
        events += [exchange.call, *([exchange.result] if exchange.result is not None else [])]
    events += buf.steps
    events += [d for deltas in buf.partial.values() for d in deltas]
    if buf.finished is not None:
        events.append(buf.finished)
    return sorted(events, key=lambda e: e.seq)


def run_dead_letter(buf: RunBuffer, topic: str, error: str, service: str) -> DeadLetter:
    """One dead letter for the whole run: `raw_value` is a JSON object with the run's buffered
    events; `source_partition`/`source_offset` say where its first event sits in `events`."""
    events = buffered_events(buf)
    body: dict[str, Any] = {"root_run_id": buf.root_run_id, "events": [e.model_dump(mode="json") for e in events]}
    raw = json.dumps(body, ensure_ascii=False)
    if len(raw) > MAX_LETTER_CHARS:
        body["events"] = [{"type": e.type, "seq": e.seq, "id": e.id} for e in events]
        body["truncated"] = True
        raw = json.dumps(body, ensure_ascii=False)[:MAX_LETTER_CHARS]
    return DeadLetter(
        source_topic=topic,
        source_partition=buf.origin.partition if buf.origin else None,
        source_offset=buf.origin.offset if buf.origin else None,
        key=buf.conversation_key,
        raw_value=raw,
        error=error,
        service=service,
    )


@dataclass(frozen=True)
class Stored:
    """The run's rows are committed: its buffer is dropped and its offsets may be committed."""

    rows: FlushRows


@dataclass(frozen=True)
class NotStored:
    """The run was not written; `reason` says why (the log line, the dead letter's error)."""

    reason: str


class Unstorable(NotStored):
    """The run's own data cannot be stored: dead-letter it."""


class Failed(NotStored):
    """The database failed: keep the run buffered and retry."""


FlushOutcome = Stored | Unstorable | Failed


class FlushCount(StrEnum):
    """The `outcome` label of `agentstream_persistence_flushes_total` (the flush-failing alert reads two)."""

    OK = "ok"  # the run is stored
    ERROR = "error"  # the database failed: retried later
    DEAD_LETTER = "dead_letter"  # never storable: the run went to `dlq`


class Flusher:
    """Writes finished runs (one per attempt, or several in one transaction) and keeps the runs
    waiting for a retry."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], registry: CollectorRegistry, redact: Redact | None = None
    ) -> None:
        self.sessions = sessions
        self.redact = redact or keep  # None: text is stored raw
        # Finished runs whose flush failed for the database's sake, oldest first: root run id → the last error.
        self.waiting: dict[str, str] = {}
        self.flushes = Counter(
            "agentstream_persistence_flushes_total",
            "Run flushes by outcome (error: retried later; dead_letter: never storable, sent to dlq)",
            ["outcome"],
            registry=registry,
        )
        for outcome in FlushCount:  # the flush-failing alert divides by them from the start
            self.flushes.labels(outcome)
        self.flush_seconds = Histogram(
            "agentstream_persistence_flush_seconds",
            "Time to write one finished run (its run row, messages and checkpoint), whatever the outcome",
            buckets=FLUSH_BUCKETS,
            registry=registry,
        )
        Gauge(
            "agentstream_persistence_flush_retries", "Finished runs waiting for a flush retry", registry=registry
        ).set_function(lambda: len(self.waiting))

    async def attempt(self, buf: RunBuffer) -> FlushOutcome:
        with self.flush_seconds.time():
            return await self._attempt(buf)

    async def _attempt(self, buf: RunBuffer) -> FlushOutcome:
        try:
            rows = rows_for(buf, self.redact)
            async with asyncio.timeout(FLUSH_TIMEOUT_S):
                await write_run(self.sessions, rows)
        except Exception as err:
            reason = failure_reason(err)
            if is_permanent(err):
                return Unstorable(reason)
            self.flushes.labels(FlushCount.ERROR).inc()
            return Failed(reason)
        self.waiting.pop(buf.root_run_id, None)
        self.flushes.labels(FlushCount.OK).inc()
        return Stored(rows)

    async def attempt_many(self, bufs: list[RunBuffer]) -> list[FlushOutcome]:
        """Each run's outcome, the runs written in one transaction when they can be: should that
        one fail for a run's own data, each run is attempted on its own, so a run's own fault stays
        its own. Should it fail for the database's sake, every run failed with it, and is retried:
        attempting each alone would meet the same database, one attempt (and one timeout) per run,
        while every run finished meanwhile waited behind them."""
        if len(bufs) < 2:
            return [await self.attempt(buf) for buf in bufs]
        started = asyncio.get_running_loop().time()
        try:
            rows = [rows_for(buf, self.redact) for buf in bufs]
            async with asyncio.timeout(FLUSH_TIMEOUT_S):
                await write_runs(self.sessions, rows)
        except Exception as err:
            if is_permanent(err):
                return [await self.attempt(buf) for buf in bufs]
            took = asyncio.get_running_loop().time() - started
            for _ in bufs:
                self.flush_seconds.observe(took)
            self.flushes.labels(FlushCount.ERROR).inc(len(bufs))
            return [Failed(failure_reason(err)) for _ in bufs]
        took = asyncio.get_running_loop().time() - started
        for buf in bufs:
            self.flush_seconds.observe(took)
            self.waiting.pop(buf.root_run_id, None)
            self.flushes.labels(FlushCount.OK).inc()
        return [Stored(r) for r in rows]

    def wait(self, root_run_id: str, reason: str) -> None:
        self.waiting[root_run_id] = reason

    def dead_lettered(self, root_run_id: str) -> None:
        self.waiting.pop(root_run_id, None)
        self.flushes.labels(FlushCount.DEAD_LETTER).inc()

    async def ready(self) -> bool:
        if self.waiting:
            oldest = next(iter(self.waiting.values()))  # the one retried first: its error is the latest
            raise NotReady(f"{len(self.waiting)} finished run(s) not stored yet, retrying: {oldest}")
        return True
