"""Retention: delete rows past their age in bounded batches, periodically, in the service that owns them.

Each owning service describes its purges as a plan (`PurgePlan`: the `Purge`s due at a given
time, built from the settings' `retention` section); `RetentionTask` runs the plan every `interval_s` and
`run_purges` runs it once (`agentstream db purge`). A purge is a plain conditional delete: two
replicas purging at once delete each row once between them, so no leader is needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter
from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Table,
    any_,
    delete,
    func,
    literal_column,
    select,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.config import Settings

FIRST_PASS_AFTER_S = 60.0
ROW_IDS = {"postgresql": "ctid", "sqlite": "rowid"}  # a service restarted more often than `interval_s` still purges


@dataclass(frozen=True)
class Purge:
    """The rows of `table` that `condition` selects: deleted, or, with `clear`, those columns set.

    A `clear` purge's condition must stop matching a row once it is cleared (else it never ends).
    """

    table: Table
    condition: ColumnElement[bool]
    clear: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.table.name

    def _picked(self, batch_size: int, dialect: str) -> ColumnElement[bool]:
        """The first `batch_size` matching rows, found by physical row id where the engine has one.

        PostgreSQL: `ctid = ANY(ARRAY(SELECT ctid … LIMIT n))` plans as a TID scan (a key-based
        `IN (SELECT …)` became a hash join over the whole table, for every batch); SQLite: `rowid`.
        """
        if dialect in ROW_IDS:
            row: ColumnElement[Any] = literal_column(ROW_IDS[dialect])
            chosen = select(row).select_from(self.table).where(self.condition).limit(batch_size).correlate(None)
            if dialect == "postgresql":
                return row == any_(func.array(chosen.scalar_subquery()))
            return row.in_(chosen)
        keys = list(self.table.primary_key.columns)
        by_key = select(*keys).where(self.condition).limit(batch_size)
        return keys[0].in_(by_key) if len(keys) == 1 else tuple_(*keys).in_(by_key)

    def statement(self, batch_size: int, dialect: str) -> Any:
        picked = self._picked(batch_size, dialect)
        if self.clear:
            return update(self.table).where(picked).values(dict(self.clear))
        return delete(self.table).where(picked)

    def count(self) -> Any:
        return select(func.count()).select_from(self.table).where(self.condition)


PurgePlan = Callable[[Settings, datetime], list[Purge]]


def table_of(model: type[Any]) -> Table:
    """The `Table` of an ORM model."""
    return cast(Table, model.__table__)


def cutoff(now: datetime, days: float) -> datetime:
    return now - timedelta(days=days)


async def purge_rows(
    sessions: async_sessionmaker[AsyncSession], purge: Purge, batch_size: int, dry_run: bool = False
) -> int:
    """Delete (or clear) every row `purge` selects, one short transaction per batch; the rows affected.

    A dry run counts them and changes nothing.
    """
    if dry_run:
        async with sessions() as session:
            return int(await session.scalar(purge.count()) or 0)
    total = 0
    while True:
        async with sessions() as session, session.begin():
            dialect = (await session.connection()).dialect.name
            result = cast("CursorResult[Any]", await session.execute(purge.statement(batch_size, dialect)))
            done = result.rowcount or 0
        total += done
        if done < batch_size:
            return total
        await asyncio.sleep(0)  # let the service's own work in between two batches


async def run_purges(
    sessions: async_sessionmaker[AsyncSession], purges: list[Purge], batch_size: int, dry_run: bool = False
) -> dict[str, int]:
    """Run `purges` in order; rows affected per table."""
    counts: dict[str, int] = {}
    for purge in purges:
        counts[purge.name] = counts.get(purge.name, 0) + await purge_rows(sessions, purge, batch_size, dry_run)
    return counts


class RetentionTask:
    """Runs a service's purge plan every `retention.interval_s`; a failing pass is logged and retried."""

    def __init__(self, plan: PurgePlan, settings: Settings, registry: CollectorRegistry, log: Any) -> None:
        self.plan = plan
        self.all_settings = settings
        self.settings = settings.retention
        self.log = log
        self.purged = Counter(
            "agentstream_purged_rows_total", "Rows deleted (or cleared) by retention", ["table"], registry=registry
        )
        self.failures = Counter("agentstream_purge_failures_total", "Retention passes that failed", registry=registry)
        self._task: asyncio.Task[None] | None = None

    def start(self, sessions: async_sessionmaker[AsyncSession] | None) -> None:
        if sessions is None:
            raise RuntimeError("retention needs the service's database sessions (start it after the engine)")
        if self.settings.enabled and self._task is None:
            self._task = asyncio.create_task(self._loop(sessions), name="retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})
            self._task = None

    async def _loop(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        await asyncio.sleep(min(self.settings.interval_s, FIRST_PASS_AFTER_S))
        while True:
            await self.run_once(sessions)
            await asyncio.sleep(self.settings.interval_s)

    async def run_once(self, sessions: async_sessionmaker[AsyncSession]) -> dict[str, int] | None:
        """One pass; None when it failed (already logged)."""
        purges = self.plan(self.all_settings, datetime.now(UTC))
        if not purges:
            return {}
        started = time.monotonic()
        counts: dict[str, int] = {}
        try:
            for purge in purges:
                done = await purge_rows(sessions, purge, self.settings.batch_size)
                counts[purge.name] = counts.get(purge.name, 0) + done
                self.purged.labels(purge.name).inc(done)
        except Exception as err:  # a database outage must not end the service: next interval tries again
            self.failures.inc()
            self.log.warning(
                "retention purge failed", error=repr(err), purged=counts, retry_in_s=self.settings.interval_s
            )
            return None
        self.log.info("retention purge", purged=counts, duration_s=round(time.monotonic() - started, 3))
        return counts


__all__ = ["Purge", "PurgePlan", "RetentionTask", "cutoff", "purge_rows", "run_purges", "table_of"]
