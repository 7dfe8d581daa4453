"""Text delta coalescing: latency first, then batching.

The first text of a message goes out at once. Text that arrives within `window`
seconds of the last send is buffered and sent as one delta when the window ends
(a timer makes sure a pause in the stream does not hold text back). Text that
arrives after a quiet window goes out at once again.

`Coalescer` is the pure decision (time is passed in); `CoalescingSender` drives it
with a real clock, a timer task and an async `send`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType


class Coalescer:
    def __init__(self, window: float) -> None:
        self.window = window
        self._pending: list[str] = []
        self._last_sent: float | None = None

    @property
    def deadline(self) -> float | None:
        """When the buffered text is due; None when nothing is buffered."""
        if not self._pending or self._last_sent is None:
            return None
        return self._last_sent + self.window

    def push(self, text: str, now: float) -> str | None:
        """Text to send now, or None when it was buffered."""
        quiet = self._last_sent is None or now - self._last_sent >= self.window
        if quiet and not self._pending:
            self._last_sent = now
            return text
        self._pending.append(text)
        return self.take(now)

    def take(self, now: float) -> str | None:
        """The buffered text if its window has ended."""
        deadline = self.deadline
        if deadline is None or now < deadline:
            return None
        self._last_sent = now
        return self._drain()

    def drain(self) -> str:
        """Everything buffered, whatever the time (end of the message)."""
        return self._drain()

    def _drain(self) -> str:
        text, self._pending = "".join(self._pending), []
        return text


Send = Callable[[str], Awaitable[None]]


class CoalescingSender:
    """Async driver: `push` text, leave the block to flush the rest.

    Sends never overlap (one lock), so text order is kept. Leaving the block with
    an exception (e.g. cancellation) drops the buffered text without sending.
    """

    def __init__(self, window: float, send: Send, clock: Callable[[], float] = time.monotonic) -> None:
        self._core = Coalescer(window)
        self._send = send
        self._clock = clock
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None

    @property
    def pending(self) -> bool:
        """Text is buffered, waiting for its window to end."""
        return self._core.deadline is not None

    async def push(self, text: str) -> None:
        if not text:
            return
        if self._lock.locked():  # a send is under way: queue behind it, text order kept
            async with self._lock:
                await self._push(text)
            return
        # Most pushes only buffer: no lock to take, nothing to await. The lock is free, so
        # acquiring it below does not yield either unless the timer is queued for it — and then
        # nothing was buffered (this text went out at once), so the timer has nothing to send first.
        out = self._core.push(text, self._clock())
        if out:
            async with self._lock:
                await self._send(out)
        else:
            self._arm_timer()

    async def _push(self, text: str) -> None:
        out = self._core.push(text, self._clock())
        if out:
            await self._send(out)
        else:
            self._arm_timer()

    def _arm_timer(self) -> None:
        if self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._flush_when_due())

    async def _flush_when_due(self) -> None:
        while (deadline := self._core.deadline) is not None:
            await asyncio.sleep(max(0.0, deadline - self._clock()))
            async with self._lock:
                out = self._core.take(self._clock())
                if out:
                    await self._send(out)

    async def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            # wait() rather than `await timer`: a cancellation of *this* task must still propagate.
            await asyncio.wait({self._timer})
            self._timer = None

    async def flush(self) -> None:
        async with self._lock:
            # Holding the lock: the timer is sleeping or waiting for the lock, never mid-send.
            await self._stop_timer()
            out = self._core.drain()
            if out:
                await self._send(out)

    async def __aenter__(self) -> CoalescingSender:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if et is None:
            await self.flush()
        else:
            await self._stop_timer()
