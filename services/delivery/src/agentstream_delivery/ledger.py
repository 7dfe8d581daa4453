"""The delivery ledger: one row per platform message of a run at a target.

A row is written before each platform call with the platform message id and the length
and SHA-256 of the text; every transition is also published on `deliveries` as a
`DeliveryReceipt`. The states (`LedgerState`) tell "not yet sent" from "maybe sent":

- `pending`: the call is intended and has not left (it waits for the chat's slot, e.g.
  behind a 429). After a crash it is simply carried out.
- `sending`: written immediately before the HTTP call leaves. After a crash it becomes
  `unknown`: the platform may have received it.
- `sent`, `failed`: the platform answered.
- `unknown`: no answer (timeout, crash mid-call). With a message id the message exists
  and its final text is re-applied once `reapply_at` has passed (a late-landing call
  must not leave a stale frame); without one, a send may have posted an orphan, and the
  segment's next text goes out as a new message.

After a crash the rows tell a restarted stream which messages exist (edit them, never
post them again) and which are already final (leave them).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol, cast

import structlog
from sqlalchemy import ColumnElement, Table, delete, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.config import TextFormat
from agentstream.contracts import DeliveryReceipt
from agentstream.contracts.deliveries import LedgerState
from agentstream.db.models_delivery import DeliveryLedger, DeliveryOrphan
from agentstream_delivery.orphans import Orphan


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# The platform answered, or the call is settled as unknown: retention may delete such rows once
# old. `pending` and `sending` are work in flight and are never purged.
SETTLED_STATES: frozenset[LedgerState] = frozenset({LedgerState.SENT, LedgerState.UNKNOWN, LedgerState.FAILED})


@dataclass(frozen=True)
class LedgerScope:
    """The (platform, chat, root run) a stream's rows belong to."""

    platform: str
    chat_id: str
    root_run_id: str
    conversation_key: str


@dataclass(frozen=True, slots=True)  # three or more per platform call: pending, sending, its outcome
class LedgerEntry:
    """One row: a segment's latest call, as its `DeliveryReceipt` carries it, and when to re-apply it."""

    segment: int
    state: LedgerState
    message_id: str | None = None
    text_length: int = 0
    text_sha256: str | None = None
    final: bool = False
    error: str | None = None
    reapply_at: float | None = None  # epoch seconds: a call of unknown outcome may land on the message until then

    def landed(self, text: str) -> bool:
        """The platform already shows exactly `text` in this message."""
        return self.state == LedgerState.SENT and self.text_sha256 == sha256(text)

    def with_text(self, state: LedgerState, text: str, final: bool, message_id: str | None = None) -> LedgerEntry:
        return replace(
            self,
            state=state,
            message_id=message_id or self.message_id,
            text_length=len(text),
            text_sha256=sha256(text),
            final=final,
            error=None,
        )

    def receipt(self, scope: LedgerScope) -> DeliveryReceipt:
        return DeliveryReceipt(
            conversation_key=scope.conversation_key,
            root_run_id=scope.root_run_id,
            platform=scope.platform,
            chat_id=scope.chat_id,
            segment=self.segment,
            state=self.state,
            platform_message_id=self.message_id,
            text_length=self.text_length,
            text_sha256=self.text_sha256,
            final=self.final,
            error=self.error,
        )


ReceiptSink = Callable[[DeliveryReceipt], Awaitable[None]]
# Hands a receipt to the producer and returns the future of its ack (`Runtime.publish_batched`).
ReceiptPublisher = Callable[[DeliveryReceipt], "asyncio.Future[None]"]
RECEIPTS_PER_WAVE = 1_000


class ReceiptQueue:
    """The ledger's receipts, queued in order for `deliveries`: a stream waits for its ledger row
    (crash safety), never for Kafka.

    Published in waves: every receipt queued while the last wave was acked goes out together (in
    order, one record batch per partition) and one ack wait covers the wave. One receipt and one
    broker round trip at a time fell behind a few receipts per run at ~17 runs/s and queued without
    bound (docs/delivery.md § Receipts)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[DeliveryReceipt] = asyncio.Queue()
        self._in_wave = 0

    async def put(self, receipt: DeliveryReceipt) -> None:
        self._queue.put_nowait(receipt)

    def pending(self) -> int:
        """Receipts queued or in the wave being published."""
        return self._queue.qsize() + self._in_wave

    async def published(self) -> None:
        """Until every receipt queued so far is published (or failed)."""
        await self._queue.join()

    async def drain(self, publish: ReceiptPublisher, log: structlog.stdlib.BoundLogger) -> None:
        """Publishes the receipts as they come, until cancelled."""
        while True:
            wave = [await self._queue.get()]
            while len(wave) < RECEIPTS_PER_WAVE and not self._queue.empty():
                wave.append(self._queue.get_nowait())
            self._in_wave = len(wave)
            try:
                await self._publish_wave(wave, publish, log)
            finally:
                self._in_wave = 0
                for _ in wave:
                    self._queue.task_done()

    @staticmethod
    async def _publish_wave(
        wave: list[DeliveryReceipt], publish: ReceiptPublisher, log: structlog.stdlib.BoundLogger
    ) -> None:
        handed: list[tuple[DeliveryReceipt, asyncio.Future[None]]] = []
        failed: list[tuple[DeliveryReceipt, BaseException]] = []
        for receipt in wave:
            try:
                handed.append((receipt, publish(receipt)))
            except Exception as err:
                failed.append((receipt, err))
        outcomes = await asyncio.gather(*(ack for _, ack in handed), return_exceptions=True)
        failed += [(r, o) for (r, _), o in zip(handed, outcomes, strict=True) if isinstance(o, BaseException)]
        if failed:  # the ledger row is the truth; a lost receipt must not stop delivery
            first, error = failed[0]
            log.warning(
                "delivery receipts not published",
                receipts=len(failed),
                root_run_id=first.root_run_id,
                segment=first.segment,
                error=repr(error),
            )


LOCKED_RETRY_S = 60.0  # how long a ledger write waits out a locked SQLite before the stream fails
LOCKED_FIRST_WAIT_S = 0.05


class Ledger(Protocol):
    async def load(self, scope: LedgerScope) -> dict[int, LedgerEntry]: ...

    async def record(self, scope: LedgerScope, entry: LedgerEntry) -> None: ...

    async def known_ids(self, platform: str, ids: Collection[str]) -> set[tuple[str, str]]:
        """(chat, id) of the messages among `ids` that some stream's row knows (any chat, any run)."""
        ...

    async def orphans(self, scope: LedgerScope) -> list[Orphan]:
        """The stream's sends of unknown outcome still to be searched for (`orphans.py`)."""
        ...

    async def keep_orphan(self, scope: LedgerScope, orphan: Orphan) -> None: ...

    async def drop_orphan(self, scope: LedgerScope, orphan: Orphan) -> None: ...


class MemoryLedger:
    """The ledger without a database (tests, benchmarks); still publishes receipts if given a sink."""

    def __init__(self, sink: ReceiptSink | None = None) -> None:
        self.rows: dict[tuple[str, str, str, int], LedgerEntry] = {}
        self.orphan_rows: dict[LedgerScope, list[Orphan]] = {}
        self.sink = sink

    async def orphans(self, scope: LedgerScope) -> list[Orphan]:
        return list(self.orphan_rows.get(scope, []))

    async def keep_orphan(self, scope: LedgerScope, orphan: Orphan) -> None:
        self.orphan_rows.setdefault(scope, []).append(orphan)

    async def drop_orphan(self, scope: LedgerScope, orphan: Orphan) -> None:
        kept = self.orphan_rows.get(scope, [])
        if orphan in kept:
            kept.remove(orphan)

    async def load(self, scope: LedgerScope) -> dict[int, LedgerEntry]:
        return {
            seg: e
            for (p, c, r, seg), e in self.rows.items()
            if (p, c, r) == (scope.platform, scope.chat_id, scope.root_run_id)
        }

    async def known_ids(self, platform: str, ids: Collection[str]) -> set[tuple[str, str]]:
        return {
            (c, e.message_id)
            for (p, c, _, _), e in self.rows.items()
            if p == platform and e.message_id is not None and e.message_id in ids
        }

    async def record(self, scope: LedgerScope, entry: LedgerEntry) -> None:
        self.rows[(scope.platform, scope.chat_id, scope.root_run_id, entry.segment)] = entry
        if self.sink is not None:
            await self.sink(entry.receipt(scope))


class SqlLedger:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], sink: ReceiptSink | None = None) -> None:
        self.sessions = sessions
        self.sink = sink
        self._queued: list[_QueuedRow] = []  # rows to write, in the order asked
        self._writer: asyncio.Task[None] | None = None  # the one task writing them

    async def load(self, scope: LedgerScope) -> dict[int, LedgerEntry]:
        async with self.sessions() as session:
            rows = (
                await session.scalars(
                    select(DeliveryLedger).where(
                        DeliveryLedger.platform == scope.platform,
                        DeliveryLedger.chat_id == scope.chat_id,
                        DeliveryLedger.root_run_id == scope.root_run_id,
                    )
                )
            ).all()
        return {
            r.segment: LedgerEntry(
                r.segment,
                LedgerState(r.state),
                r.platform_message_id,
                r.text_length,
                r.text_sha256,
                r.final,
                r.error,
                r.reapply_at,
            )
            for r in rows
        }

    async def known_ids(self, platform: str, ids: Collection[str]) -> set[tuple[str, str]]:
        async with self.sessions() as session:
            found = await session.execute(
                select(DeliveryLedger.chat_id, DeliveryLedger.platform_message_id).where(
                    DeliveryLedger.platform == platform, DeliveryLedger.platform_message_id.in_(list(ids))
                )
            )
            return {(chat, i) for chat, i in found.tuples() if i is not None}

    async def orphans(self, scope: LedgerScope) -> list[Orphan]:
        async with self.sessions() as session:
            rows = (
                await session.scalars(select(DeliveryOrphan).where(*_orphans_of(scope)).order_by(DeliveryOrphan.id))
            ).all()
        return [Orphan(r.segment, r.text, TextFormat(r.markup), r.floor, r.lands_by) for r in rows]

    async def keep_orphan(self, scope: LedgerScope, orphan: Orphan) -> None:
        async with self.sessions.begin() as session:
            session.add(
                DeliveryOrphan(
                    platform=scope.platform,
                    chat_id=scope.chat_id,
                    root_run_id=scope.root_run_id,
                    segment=orphan.segment,
                    text=orphan.text,
                    markup=orphan.markup.value,
                    floor=orphan.floor,
                    lands_by=orphan.lands_by,
                )
            )

    async def drop_orphan(self, scope: LedgerScope, orphan: Orphan) -> None:
        async with self.sessions.begin() as session:
            await session.execute(
                delete(DeliveryOrphan).where(
                    *_orphans_of(scope),
                    DeliveryOrphan.segment == orphan.segment,
                    DeliveryOrphan.lands_by == orphan.lands_by,
                )
            )

    async def record(self, scope: LedgerScope, entry: LedgerEntry) -> None:
        """Written (committed) when this returns; with the other streams' rows asked for meanwhile."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued.append((scope, entry, done))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_queued(), name="ledger-writes")
        await done
        if self.sink is not None:
            await self.sink(entry.receipt(scope))

    async def _write_queued(self) -> None:
        """Group commits: the rows queued while a transaction ran share the next one. A transaction
        per row held one pooled connection each across several loop turns, and at the soak's
        ~17 runs/s on PostgreSQL the streams queued for the pool until they timed out (30 s),
        holding the commit meanwhile (docs/delivery.md § The ledger)."""
        try:
            while self._queued:
                batch, self._queued = self._queued[:MAX_ROWS_PER_WRITE], self._queued[MAX_ROWS_PER_WRITE:]
                try:
                    await self._write_waiting_out_locks(batch)
                except Exception as err:
                    if len(batch) == 1 or _locked(err):  # the database's state, not a row's: all fail alike
                        for row in batch:
                            _settle(row[2], err)
                        continue
                    for row in batch:  # one at a time: a row that cannot be written fails its own stream only
                        try:
                            await self._write_waiting_out_locks([row])
                        except Exception as err:
                            _settle(row[2], err)
                        else:
                            _settle(row[2], None)
                else:
                    for row in batch:
                        _settle(row[2], None)
        finally:
            self._writer = None

    async def _write_waiting_out_locks(self, rows: list[_QueuedRow]) -> None:
        # A SQLite shared by five busy processes may keep its write lock past the busy timeout
        # (delivery catching up hundreds of streams after a broker restart): wait and write
        # again, rather than let the stream crash and its answer never show.
        delay = LOCKED_FIRST_WAIT_S
        deadline = time.monotonic() + LOCKED_RETRY_S
        while True:
            try:
                await self._write(rows)
                return
            except OperationalError as err:
                if not _locked(err) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _write(self, rows: list[_QueuedRow]) -> None:
        async with self.sessions.begin() as session:
            await _write_rows(session, [(scope, entry) for scope, entry, _ in rows])


MAX_ROWS_PER_WRITE = 500
_QueuedRow = tuple[LedgerScope, LedgerEntry, "asyncio.Future[None]"]


def _locked(err: BaseException) -> bool:
    return isinstance(err, OperationalError) and "database is locked" in str(err.orig)


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():  # its stream was cancelled meanwhile (the row is written all the same)
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


_KEY = ("platform", "chat_id", "root_run_id", "segment")
_UPDATED = ("state", "platform_message_id", "text_length", "text_sha256", "final", "error", "reapply_at", "updated_at")


async def _write_rows(session: AsyncSession, rows: list[tuple[LedgerScope, LedgerEntry]]) -> None:
    """Every row in one statement, each inserted or updated in place (an upsert on the row's unique
    key). A row asked for twice is written as the later (the earlier would be overwritten in the
    same transaction): a statement may not touch a row twice. One statement, not an update and an
    insert per row: the transaction holds the database's lock for one round trip, not hundreds."""
    now = datetime.now(UTC)
    latest: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for scope, entry in rows:
        latest[(scope.platform, scope.chat_id, scope.root_run_id, entry.segment)] = {
            "platform": scope.platform,
            "chat_id": scope.chat_id,
            "root_run_id": scope.root_run_id,
            "segment": entry.segment,
            "conversation_key": scope.conversation_key,
            "state": entry.state,
            "platform_message_id": entry.message_id,
            "text_length": entry.text_length,
            "text_sha256": entry.text_sha256,
            "final": entry.final,
            "error": (entry.error or "")[:500] or None,
            "reapply_at": entry.reapply_at,
            "updated_at": now,
        }
    table = cast("Table", DeliveryLedger.__table__)
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    upsert = (postgresql_insert if dialect == "postgresql" else sqlite_insert)(table)
    statement = upsert.on_conflict_do_update(
        index_elements=[table.c[name] for name in _KEY],
        set_={name: upsert.excluded[name] for name in _UPDATED},
    )
    await session.execute(statement, list(latest.values()))


def _orphans_of(scope: LedgerScope) -> tuple[ColumnElement[bool], ...]:
    return (
        DeliveryOrphan.platform == scope.platform,
        DeliveryOrphan.chat_id == scope.chat_id,
        DeliveryOrphan.root_run_id == scope.root_run_id,
    )
