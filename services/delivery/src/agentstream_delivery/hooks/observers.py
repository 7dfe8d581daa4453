"""Observer hooks off the delivery path: one worker and one bounded queue per hook.

`submit` never waits on a hook: a best-effort hook whose queue is full loses the
event (counted in `agentstream_hook_dropped_total`); a durable hook (billing, audit)
makes `submit` wait for room instead — only the hooks consumer calls `submit`, so
that back-pressure holds back the hooks' own Kafka consumer, never a stream.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from agentstream_delivery.hooks.base import ObserverHook, call_within
from agentstream_delivery.hooks.events import HookEvent, matches
from agentstream_delivery.hooks.metrics import HookMetrics


class _Worker:
    def __init__(self, hook: ObserverHook, queue_size: int) -> None:
        self.hook = hook
        self.queue: asyncio.Queue[HookEvent] = asyncio.Queue(maxsize=queue_size)
        self.task: asyncio.Task[None] | None = None


class ObserverPool:
    def __init__(
        self,
        hooks: list[ObserverHook],
        metrics: HookMetrics,
        log: structlog.stdlib.BoundLogger,
        queue_size: int = 1000,
        timeout_s: float = 10.0,
    ) -> None:
        self._workers = [_Worker(h, queue_size) for h in hooks]
        self.metrics = metrics
        self.log = log
        self.timeout_s = timeout_s

    @property
    def hooks(self) -> list[ObserverHook]:
        return [w.hook for w in self._workers]

    def start(self) -> None:
        for w in self._workers:
            if w.task is None:
                w.task = asyncio.create_task(self._run(w), name=f"hook-{w.hook.name}")

    async def stop(self) -> None:
        tasks = [w.task for w in self._workers if w.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for w in self._workers:
            w.task = None

    async def submit(self, event: HookEvent) -> None:
        for w in self._workers:
            if not matches(w.hook.points, event.point):
                continue
            if w.hook.durable:
                await w.queue.put(event)
                continue
            try:
                w.queue.put_nowait(event)
            except asyncio.QueueFull:
                self.metrics.dropped.labels(w.hook.name).inc()
                self.log.warning("observer hook queue full; event dropped", hook=w.hook.name, point=event.point)

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait until every queued event was handled (tests, graceful stop)."""
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(w.queue.join() for w in self._workers))

    async def _run(self, w: _Worker) -> None:
        while True:
            event = await w.queue.get()
            try:
                await self._call(w.hook, event)
            finally:
                w.queue.task_done()

    async def _call(self, hook: ObserverHook, event: HookEvent) -> None:
        started = time.perf_counter()
        outcome = "ok"
        try:
            await call_within(hook.fn, event, budget_s=self.timeout_s)
        except TimeoutError:
            outcome = "timeout"
            self.log.warning("observer hook timed out", hook=hook.name, point=event.point, timeout_s=self.timeout_s)
        except Exception:  # isolated: a broken hook must not stop its worker or anything else
            outcome = "error"
            self.log.exception("observer hook failed", hook=hook.name, point=event.point)
        finally:
            self.metrics.calls.labels(hook.name, "observer", outcome).inc()
            self.metrics.duration.labels(hook.name, "observer").observe(time.perf_counter() - started)
