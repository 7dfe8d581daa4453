"""The front door's outbox: what it accepted (202) while the broker keeps its records in memory.

The embedded broker forgets every record when its process ends, including a message the
front door answered 202 for a moment before (docs/deploy.md "The embedded broker keeps
everything in memory"). So, with `kafka.in_memory`, the front door writes the message to
`ingress_outbox` before producing it, and the row stays until the message is done: decided
as no run (a notice, a command, a dead letter: deleted when that output is acked), or its run
ended (a `runs` row for the run id ingress recorded once the run's start was acked).

When a service sees a new cluster (a restarted embedded broker), ingress, still refusing with
503, sends every row again (docs/decisions.md "Broker loss"): one never decided goes as a new
message; one whose run had started goes with the `agentstream-resent-from` header naming where
it first landed, so ingress derives the same run id (starting.py) and the runner, persistence
and delivery recognise the repeat; its dedupe row is deleted so ingress decides it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from aiokafka import ConsumerRecord
from sqlalchemy import and_, delete, or_, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from agentstream.contracts import InboundMessage
from agentstream.contracts.inbound import DedupeKey
from agentstream.db import Run
from agentstream.db.models_ingress import InboundDedupe, InboundOutbox
from agentstream.db.session import autocommitting
from agentstream_ingress.starting import Position

RESENT_FROM = "agentstream-resent-from"  # header: "<partition>:<offset>" of the record first accepted
# A row never decided this long after it was written: its POST got a 503 and the record never
# landed (an ambiguous 503 that did land is decided within seconds), so nothing waits for it.
UNDECIDED_KEPT = timedelta(hours=1)
SWEEP_INTERVAL_S = 30.0

# A batch's started runs in one statement, whatever the batch size (a statement per record
# cost more CPU than the rest of ingress's work per record), the batch as one JSON parameter
# as in store.py. Most records never went through the front door: most match no row.
OUTBOX = InboundOutbox.__tablename__
DECIDED_PG = text(
    f'UPDATE {OUTBOX} AS o SET "partition" = t.pa, "offset" = t.o, run_id = t.run FROM (SELECT r->>0 AS s,'
    " r->>1 AS p, r->>2 AS m, CAST(r->>3 AS integer) AS pa, CAST(r->>4 AS bigint) AS o, r->>5 AS run"
    " FROM json_array_elements(CAST(:rows AS json)) AS r) AS t"
    " WHERE o.source = t.s AND o.platform = t.p AND o.message_id = t.m"
)
DECIDED_ROW = text(
    f'UPDATE {OUTBOX} SET "partition" = :pa, "offset" = :o, run_id = :r'
    " WHERE source = :s AND platform = :p AND message_id = :m"
)


def resent_from(headers: Sequence[tuple[str, bytes | None]] | None) -> Position | None:
    """The first position a re-sent record carries, or None (not a re-send, or a header not ours)."""
    for name, value in headers or ():
        if name != RESENT_FROM or value is None:
            continue
        partition, sep, offset = value.decode("ascii", "replace").partition(":")
        if sep and partition.isdigit() and offset.isdigit():
            return int(partition), int(offset)
        return None
    return None


def position_of(record: ConsumerRecord) -> Position:
    """Where the record's run ids derive from: where it first landed in `inbound`."""
    return resent_from(record.headers) or (record.partition, record.offset)


def resent_header(position: Position) -> tuple[str, bytes]:
    return RESENT_FROM, f"{position[0]}:{position[1]}".encode("ascii")


@dataclass(frozen=True)
class Unfinished:
    """An accepted message whose run has not ended: what to send again, and from where it came."""

    message: InboundMessage
    first: Position | None  # None: never decided, it goes as a new message


def _key(row: InboundOutbox | tuple[str, str, str]) -> DedupeKey:
    if isinstance(row, InboundOutbox):
        return (row.source, row.platform, row.message_id)
    return (row[0], row[1], row[2])


class Outbox:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        self.single = autocommitting(sessions)  # `decided`: statements that each stand alone
        # Not at once: on a start the other services may be migrating the same (SQLite) database.
        self.next_sweep = time.monotonic() + SWEEP_INTERVAL_S

    async def accepting(self, msg: InboundMessage) -> None:
        """Before producing: kept until done. A repeat of a row's id (a client's retry) keeps the first."""
        source, platform, message_id = msg.dedupe_key
        values = {
            "source": source,
            "platform": platform,
            "message_id": message_id,
            "message": msg.model_dump_json(),
            "accepted_at": datetime.now(UTC),
        }
        async with self.sessions() as s, s.begin():
            conn = await s.connection()
            insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
            await conn.execute(insert(InboundOutbox).values(**values).on_conflict_do_nothing())

    async def decided(
        self, started: Collection[tuple[DedupeKey, Position, str]], no_run: Collection[DedupeKey]
    ) -> None:
        """A batch's output is acked: `started` (key, first position, run id) wait for their run's
        end; `no_run` (notices, commands, dead letters) are done."""
        if not started and not no_run:
            return
        # Two statements, each complete alone (a re-read batch repeats both): no transaction.
        async with self.single() as s, s.begin():
            conn = await s.connection()
            if started and conn.dialect.name == "postgresql":
                rows = [[*key, *position, run_id] for key, position, run_id in started]
                await conn.execute(DECIDED_PG, {"rows": json.dumps(rows)})
            elif started:  # SQLite: one cached statement over a parameter list
                await conn.execute(
                    DECIDED_ROW,
                    [
                        {"s": s, "p": p, "m": m, "pa": partition, "o": offset, "r": run_id}
                        for (s, p, m), (partition, offset), run_id in started
                    ],
                )
            if no_run:
                await s.execute(delete(InboundOutbox).where(_matches(no_run)))

    async def sweep(self) -> None:
        """Delete the rows whose run has ended, and undecided ones older than `UNDECIDED_KEPT`."""
        stale = datetime.now(UTC) - UNDECIDED_KEPT
        async with self.sessions() as s, s.begin():
            await s.execute(
                delete(InboundOutbox).where(
                    or_(
                        InboundOutbox.run_id.in_(select(Run.run_id)),
                        and_(InboundOutbox.run_id.is_(None), InboundOutbox.accepted_at < stale),
                    )
                )
            )
        self.next_sweep = time.monotonic() + SWEEP_INTERVAL_S

    async def unfinished(self) -> list[Unfinished]:
        """After a sweep: every row still waiting, oldest first, their dedupe rows deleted (so
        ingress decides them again when they are sent again)."""
        await self.sweep()
        async with self.sessions() as s, s.begin():
            # The write first (a SQLite transaction that reads before it writes fails at once when busy).
            waiting = select(InboundOutbox.source, InboundOutbox.platform, InboundOutbox.message_id)
            key = tuple_(InboundDedupe.source, InboundDedupe.platform, InboundDedupe.message_id)
            await s.execute(delete(InboundDedupe).where(key.in_(waiting)))
            rows = (await s.execute(select(InboundOutbox).order_by(InboundOutbox.accepted_at))).scalars().all()
        return [
            Unfinished(
                InboundMessage.model_validate_json(row.message),
                (row.partition, row.offset) if row.partition is not None and row.offset is not None else None,
            )
            for row in rows
        ]


def _matches(keys: Collection[DedupeKey]) -> ColumnElement[bool]:
    return tuple_(InboundOutbox.source, InboundOutbox.platform, InboundOutbox.message_id).in_(list(keys))
