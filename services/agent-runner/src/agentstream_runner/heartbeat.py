"""`run.heartbeat` while a run waits on something slow (tools), so the
persistence watchdog can tell a slow run from a lost one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from agentstream.contracts import RunHeartbeat
from agentstream_runner.emitter import RunEmitter


async def _beat(events: RunEmitter, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        await events.emit(RunHeartbeat)


@contextlib.asynccontextmanager
async def heartbeat(events: RunEmitter, interval_s: float) -> AsyncIterator[None]:
    task = asyncio.create_task(_beat(events, interval_s), name=f"heartbeat:{events.run_id}")
    try:
        yield
    finally:
        task.cancel()
        # wait() rather than `await task`: a cancellation of *this* task must still propagate.
        await asyncio.wait({task})
