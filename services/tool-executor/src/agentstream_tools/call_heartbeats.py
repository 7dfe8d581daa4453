"""Heartbeats of a running call: `tool.heartbeat` on `events` every interval until it ends.

persistence's watchdog ends a run that falls silent; a call that runs for minutes must not
look like one. The executor, which runs the call, says it is alive (the runner's own
`run.heartbeat` only says the runner is). The first beat goes out one interval after the
call starts, so a quick call sends none. A beat that cannot be published is logged and
skipped: the next one may get through, and the call goes on either way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

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


def heartbeats(
    request: ToolCallRequest,
    publish: PublishBeat,
    interval_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> CallHeartbeats:
    """`async with heartbeats(...)`: beats for `request` while the block runs; none after it (a
    beat in flight is cancelled)."""
    return CallHeartbeats(request, publish, interval_s, clock)


class CallHeartbeats:
    """The beats of one call: `heartbeats`.

    Until the first beat is due it is only a timer: most calls end before it, and a task per
    call (started, cancelled, awaited) was a tenth of a quick call's CPU in the executor."""

    def __init__(
        self,
        request: ToolCallRequest,
        publish: PublishBeat,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.request, self.publish, self.interval_s, self.clock = request, publish, interval_s, clock
        self.started = 0.0
        self._first_beat: asyncio.TimerHandle | None = None
        self._beating: asyncio.Task[None] | None = None

    async def __aenter__(self) -> None:
        self.started = self.clock()
        # The callback runs in this context (the call's log fields), and so does the task it starts.
        self._first_beat = asyncio.get_running_loop().call_later(self.interval_s, self._start_beating)

    async def __aexit__(self, *exc_info: object) -> None:
        if self._first_beat is not None:
            self._first_beat.cancel()
        if self._beating is not None:
            self._beating.cancel()
            await asyncio.wait({self._beating})

    def _start_beating(self) -> None:
        self._beating = asyncio.create_task(self._beat_forever(), name=f"beat:{self.request.call_id}")

    async def _beat_forever(self) -> None:
        while True:
            try:
                await self.publish(beat_of(self.request, self.clock() - self.started))
            except Exception as err:  # a lost beat is not the call's failure
                log.warning("tool heartbeat not published", **log_fields(self.request), error=repr(err))
            await asyncio.sleep(self.interval_s)
