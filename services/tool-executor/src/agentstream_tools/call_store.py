"""The `tool_calls` table: each `(run_id, call_id)` is executed at most once.

A call is claimed (`running`) before its tool runs and its result stored (`done`)
before it is published, so a redelivered request (a crash before the commit) finds
either the stored result, published again without running the tool, or a claim
left by an executor that died during the call: that call is not run again.

Writes are group commits: `claim` and `finish` return once their row is committed, but
the claims and results asked for while a transaction runs all go into the next one (one
multi-row insert, one batched update). At one call in flight that is one transaction per
step, as before; at fifty it is a few transactions for the lot, which is what kept the
executor's CPU busy. A failed transaction fails every call in it (each retries its step).

A claim is written at once (its tool waits for it); a result waits up to `RESULT_WAIT_S` for
the next claim and rides in its transaction. It has been published already, and only its
call's offset commit waits for it (the executor commits every 0.1 s): at fifty in flight the
results of one wave go in with the claims of the next, one transaction per wave instead of two.

On SQLite a transaction is one hop to a thread of the store's own, which runs it whole through
the blocking driver: aiosqlite hops to its thread for every step (cursor, execute, fetch, close,
commit, the pool's reset: six per claim), and the hops were most of a lone call's claim.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, Row, bindparam, select, update
from sqlalchemy import create_engine as create_blocking_engine
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream.db.models_tools import ToolCallRow, ToolCallState
from agentstream.db.session import sqlite_pragmas, sync_url
from agentstream_tools.executor import answer

# What the model reads for a call the executor died in: the tool may or may not have done
# its work, so repeating it could do it twice.
STOPPED_DURING_CALL = (
    "the tool-executor stopped while this call was running; it is not repeated because the tool may already "
    "have had its effect"
)

Prior = ToolCallResult | ToolCallState | None  # what `claim` found: see its docstring
RESULT_WAIT_S = 0.05  # a result left for the next claim's transaction at most this long


@dataclass
class _Pending:
    """A claim (`result` None) or a result to store, and the future its caller awaits."""

    request: ToolCallRequest
    result: ToolCallResult | None
    outcome: asyncio.Future[Prior] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class ToolCallStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
        # One statement each, built once, run with a list of parameter sets: compiled once.
        # RETURNING, not rowcount: drivers disagree on rowcount for ON CONFLICT DO NOTHING.
        self._claim_rows = insert(ToolCallRow).on_conflict_do_nothing().returning(ToolCallRow.idempotency_key)
        self._store_results = (
            update(ToolCallRow)
            .where(ToolCallRow.idempotency_key == bindparam("key"))
            .values(state=ToolCallState.DONE.value, result=bindparam("stored"), finished_at=bindparam("finished"))
        )
        self._queue: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None
        self._results_due: asyncio.TimerHandle | None = None  # writes queued results alone, if no claim came
        self._results_now = False  # the queued results may not wait any longer
        self._closing = False
        # The engine the writes go through (SQLite: the blocking driver, on `_thread` only).
        self.writes: Engine = engine.sync_engine
        self._thread: ThreadPoolExecutor | None = None
        if engine.dialect.name == "sqlite":
            self.writes = create_blocking_engine(sync_url(engine.url.render_as_string(hide_password=False)))
            sqlite_pragmas(self.writes)
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="tool-call-store")

    async def claim(self, request: ToolCallRequest) -> Prior:
        """None: claimed now, run the tool. Otherwise what an earlier delivery left: its stored
        result (`done`), or `ToolCallState.RUNNING` (it never finished)."""
        return await self._submit(_Pending(request, None))

    async def finish(self, request: ToolCallRequest, result: ToolCallResult, *, at_once: bool = False) -> None:
        """`result` stored as the call's answer; returns once it is committed: with the next
        claim, within `RESULT_WAIT_S`, or (`at_once`) in the next transaction."""
        await self._submit(_Pending(request, result), at_once)

    def write_now(self) -> None:
        """The queued results written now, without waiting for a claim to go with."""
        self._results_now = bool(self._queue)
        self._write_soon()

    def _write_soon(self) -> None:
        if self._queue and (self._writer is None or self._writer.done()):
            self._writer = asyncio.create_task(self._write_queued(), name="tool-call-store")

    async def close(self) -> None:
        """After the last write (bounded): the SQLite thread and its connection are let go."""
        self._closing = True
        self.write_now()
        if self._writer is not None and not self._writer.done():
            await asyncio.wait({self._writer}, timeout=5.0)
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self.writes.dispose()

    async def get(self, idempotency_key: str) -> Row[Any] | None:
        async with self.engine.connect() as conn:
            return (
                await conn.execute(select(ToolCallRow.__table__).where(ToolCallRow.idempotency_key == idempotency_key))
            ).first()

    # -- group commits -------------------------------------------------------------
    async def _submit(self, pending: _Pending, at_once: bool = False) -> Prior:
        self._queue.append(pending)
        if pending.result is None or self._closing:
            self._write_soon()
        elif at_once:
            self.write_now()
        elif self._results_due is None:
            self._results_due = asyncio.get_running_loop().call_later(RESULT_WAIT_S, self.write_now)
        # A caller cancelled meanwhile cancels only its own future: the writer skips it.
        return await pending.outcome

    async def _write_queued(self) -> None:
        """Transactions while a claim (or a result past its wait) is queued, each taking everything
        queued before it began; results left queued wait for the next claim, `RESULT_WAIT_S` at most."""
        while self._queue and (self._results_now or self._closing or any(p.result is None for p in self._queue)):
            if self._results_due is not None:  # every queued result goes now
                self._results_due.cancel()
                self._results_due = None
            self._results_now = False
            batch, self._queue = self._queue, []
            try:
                outcomes = await self._transaction(batch)
            except Exception as err:  # the database away: every caller retries its own step
                for pending in batch:
                    if not pending.outcome.done():
                        pending.outcome.set_exception(err)
                continue
            for pending, outcome in zip(batch, outcomes, strict=True):
                if not pending.outcome.done():
                    pending.outcome.set_result(outcome)
        if self._queue and self._results_due is None:  # results queued during the last transaction
            self._results_due = asyncio.get_running_loop().call_later(RESULT_WAIT_S, self.write_now)

    async def _transaction(self, batch: list[_Pending]) -> list[Prior]:
        if self._thread is None:  # PostgreSQL: asyncpg needs no thread
            async with self.engine.begin() as conn:
                return await conn.run_sync(self._write, batch)
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._write_blocking, batch)

    def _write_blocking(self, batch: list[_Pending]) -> list[Prior]:
        with self.writes.begin() as conn:
            return self._write(conn, batch)

    def _write(self, conn: Connection, batch: list[_Pending]) -> list[Prior]:
        """Results first, then claims: a claim after its call's result (a redelivery) finds it."""
        now = datetime.now(UTC)
        results = [p for p in batch if p.result is not None]
        if results:
            conn.execute(
                self._store_results,
                [
                    {"key": p.request.idempotency_key, "stored": p.result.model_dump(mode="json"), "finished": now}
                    for p in results
                    if p.result is not None
                ],
            )
        claims: dict[str, _Pending] = {}  # the first claim of each key; a second in the same batch finds it running
        for p in batch:
            if p.result is None:
                claims.setdefault(p.request.idempotency_key, p)
        inserted: set[str] = set()
        found: dict[str, Row[Any]] = {}
        if claims:
            rows = [_claim_row(p.request, now) for p in claims.values()]
            inserted = set(conn.execute(self._claim_rows, rows).scalars())
            if earlier := [key for key in claims if key not in inserted]:
                query = select(ToolCallRow.idempotency_key, ToolCallRow.state, ToolCallRow.result).where(
                    ToolCallRow.idempotency_key.in_(earlier)
                )
                found = {row.idempotency_key: row for row in conn.execute(query)}
        outcomes: list[Prior] = []
        for p in batch:
            key = p.request.idempotency_key
            if p.result is not None or (key in inserted and claims[key] is p):
                outcomes.append(None)
            else:
                outcomes.append(_prior(found.get(key)))
        return outcomes


def _claim_row(request: ToolCallRequest, now: datetime) -> dict[str, Any]:
    return {
        "idempotency_key": request.idempotency_key,
        "run_id": request.run_id,
        "call_id": request.call_id,
        "tool": request.tool,
        "state": ToolCallState.RUNNING.value,
        "started_at": now,  # `result` and `finished_at` left out: SQL NULL until it is done
    }


def _prior(row: Row[Any] | None) -> ToolCallResult | ToolCallState:
    """What an earlier claim left: its stored result, or `running` (also a claim made just now in this batch)."""
    if row is not None and row.state == ToolCallState.DONE and row.result is not None:
        return ToolCallResult.model_validate(row.result)
    return ToolCallState.RUNNING


def stopped_during_call(request: ToolCallRequest) -> ToolCallResult:
    """The answer for a call claimed by an executor that died before storing its result."""
    return answer(request, ok=False, error=STOPPED_DURING_CALL, retryable=False)
