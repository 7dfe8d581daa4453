"""The `tool_calls` table: each `(run_id, call_id)` is executed at most once.

A call is claimed (`running`) before its tool runs and its result stored (`done`)
before it is published, so a redelivered request (a crash before the commit) finds
either the stored result, published again without running the tool, or a claim
left by an executor that died during the call: that call is not run again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream.db.models_tools import ToolCallRow, ToolCallState
from agentstream_tools.executor import answer

# What the model reads for a call the executor died in: the tool may or may not have done
# its work, so repeating it could do it twice.
STOPPED_DURING_CALL = (
    "the tool-executor stopped while this call was running; it is not repeated because the tool may already "
    "have had its effect"
)


class ToolCallStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def claim(self, request: ToolCallRequest) -> ToolCallResult | ToolCallState | None:
        """None: claimed now, run the tool. Otherwise what an earlier delivery left: its stored
        result (`done`), or `ToolCallState.RUNNING` (it never finished)."""
        values: dict[str, Any] = {
            "idempotency_key": request.idempotency_key,
            "run_id": request.run_id,
            "call_id": request.call_id,
            "tool": request.tool,
            "state": ToolCallState.RUNNING.value,
            "result": None,
            "started_at": datetime.now(UTC),
            "finished_at": None,
        }
        async with self.sessions() as s, s.begin():
            conn = await s.connection()
            insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
            # RETURNING, not rowcount: drivers disagree on rowcount for ON CONFLICT DO NOTHING.
            stmt = insert(ToolCallRow).values(**values).on_conflict_do_nothing().returning(ToolCallRow.idempotency_key)
            if (await conn.execute(stmt)).first() is not None:
                return None
            row = (
                await conn.execute(
                    select(ToolCallRow.state, ToolCallRow.result).where(
                        ToolCallRow.idempotency_key == request.idempotency_key
                    )
                )
            ).one()
        if row.state == ToolCallState.DONE and row.result is not None:
            return ToolCallResult.model_validate(row.result)
        return ToolCallState.RUNNING

    async def finish(self, request: ToolCallRequest, result: ToolCallResult) -> None:
        async with self.sessions() as s, s.begin():
            await s.execute(
                update(ToolCallRow)
                .where(ToolCallRow.idempotency_key == request.idempotency_key)
                .values(
                    state=ToolCallState.DONE.value, result=result.model_dump(mode="json"), finished_at=datetime.now(UTC)
                )
            )

    async def get(self, idempotency_key: str) -> ToolCallRow | None:
        async with self.sessions() as s:
            return await s.get(ToolCallRow, idempotency_key)


def stopped_during_call(request: ToolCallRequest) -> ToolCallResult:
    """The answer for a call claimed by an executor that died before storing its result."""
    return answer(request, ok=False, error=STOPPED_DURING_CALL, retryable=False)
