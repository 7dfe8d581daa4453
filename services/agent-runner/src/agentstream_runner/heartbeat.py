"""`run.heartbeat` every `interval_s` while a run is alive, so the persistence watchdog
can tell a slow run from a lost one.

A timer, not a sleeping task: leaving the block cancels the timer without yielding to
the event loop, so the run's next events (its ending) are handed to the producer in the
same tick as its last ones and share their produce request. Only a beat already being
emitted is waited for, so no heartbeat can follow the run's `run.finished`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from agentstream.contracts import RunHeartbeat
from agentstream_runner.emitter import RunEmitter


def _retrieve(task: asyncio.Task[object]) -> None:
    # A failed beat is not the run's failure: the next emit reports a refused record.
    if not task.cancelled():
        task.exception()


@contextlib.asynccontextmanager
async def heartbeat(events: RunEmitter, interval_s: float) -> AsyncIterator[None]:
    loop = asyncio.get_running_loop()
    beating: asyncio.Task[object] | None = None
    timer: asyncio.TimerHandle | None = None

    def beat() -> None:
        nonlocal beating, timer
        beating = asyncio.create_task(events.emit(RunHeartbeat), name=f"heartbeat:{events.run_id}")
        beating.add_done_callback(_retrieve)
        timer = loop.call_later(interval_s, beat)

    timer = loop.call_later(interval_s, beat)
    try:
        yield
    finally:
        timer.cancel()
        if beating is not None and not beating.done():
            await asyncio.wait({beating})
