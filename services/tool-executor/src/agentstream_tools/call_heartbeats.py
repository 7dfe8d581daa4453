"""Heartbeats of a running call: `tool.heartbeat` on `events` every interval until it ends.

persistence's watchdog ends a run that falls silent; a call that runs for minutes must not
look like one. The executor, which runs the call, says it is alive (the runner's own
`run.heartbeat` only says the runner is). The first beat goes out one interval after the
call starts, so a quick call sends none. A beat that cannot be published is logged and
skipped: the next one may get through, and the call goes on either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from agentstream.contracts import ToolCallRequest, ToolHeartbeat
from agentstream.observability import get_logger
from agentstream_tools.call_coordinates import coordinates, log_fields

log = get_logger("agentstream.tool-executor")

PublishBeat = Callable[[ToolHeartbeat], Awaitable[None]]


def beat_of(request: ToolCallRequest, elapsed_s: float) -> ToolHeartbeat:
    """The heartbeat of `request`, `elapsed_s` into the call; it repeats the `tool.call`'s seq."""
    return ToolHeartbeat(
        **coordinates(request), seq=request.call_seq if request.call_seq is not None else 0, elapsed_ms=elapsed_s * 1000
    )


async def _beat_forever(
    request: ToolCallRequest, publish: PublishBeat, interval_s: float, clock: Callable[[], float]
) -> None:
    started = clock()
    while True:
        await asyncio.sleep(interval_s)
        try:
            await publish(beat_of(request, clock() - started))
        except Exception as err:  # a lost beat is not the call's failure
            log.warning("tool heartbeat not published", **log_fields(request), error=repr(err))


@contextlib.asynccontextmanager
async def heartbeats(
    request: ToolCallRequest,
    publish: PublishBeat,
    interval_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[None]:
    """Beats for `request` while the block runs; none after it (a beat in flight is cancelled)."""
    task = asyncio.create_task(_beat_forever(request, publish, interval_s, clock), name=f"beat:{request.call_id}")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.wait({task})
