"""The `tool_calls` store on both engines: a call is claimed once, its stored result comes back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import ToolCallRequest, ToolCallResult
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models_tools import ToolCallState
from agentstream_tools.call_store import ToolCallStore


def request(call_id: str = "c1", tool: str = "counter", run_id: str = "r1") -> ToolCallRequest:
    return ToolCallRequest(
        run_id=run_id, root_run_id=run_id, conversation_key="web:a", call_id=call_id, tool=tool, arguments="{}"
    )


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def test_a_call_is_claimed_once_and_its_stored_result_comes_back(sessions):  # type: ignore[no-untyped-def]
    store = ToolCallStore(sessions)
    call = request(run_id="r" * 64)  # the longest run id the contract allows: still claimable
    assert await store.claim(call) is None
    assert await store.claim(call) is ToolCallState.RUNNING  # claimed, never finished
    result = ToolCallResult(
        run_id=call.run_id,
        root_run_id=call.run_id,
        conversation_key="web:a",
        call_id="c1",
        tool="counter",
        ok=True,
        content="1",
        duration_ms=3.0,
    )
    await store.finish(call, result)
    assert await store.claim(call) == result  # the very record, ids included
    row = await store.get(call.idempotency_key)
    assert row is not None and (row.state, row.run_id, row.call_id, row.tool) == ("done", call.run_id, "c1", "counter")
    assert row.finished_at is not None and row.finished_at >= row.started_at
    assert await store.claim(request(call_id="c2", run_id=call.run_id)) is None  # another call of the run
