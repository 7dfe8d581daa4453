"""The drain part: the first step of a stop (SIGTERM). Not ready, no new work, and up to the
grace period for what runs to finish while the broker still consumes and publishes; what is
left is cut by the stop and counted (docs/deploy.md § Stopping)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter


class Drain:
    def __init__(self, service: str, registry: CollectorRegistry, log: Any) -> None:
        self.service = service
        self.log = log
        self.draining = False  # asked to stop: no new work, what runs finishes
        self.cuts = Counter(
            "agentstream_shutdown_cut_total",
            "Work still running when a stop's grace period (shutdown.grace_s) ended, and cut, by what it was",
            ["service", "what"],
            registry=registry,
        )

    def begin(self) -> None:
        """Draining from now on: no new work is taken (the service reads `draining`)."""
        self.draining = True

    async def run(self, grace_s: float, finish: Callable[[], Awaitable[None]]) -> None:
        """Draining (`begin`); `finish` (the service's `on_drain`) gets up to `grace_s`."""
        self.begin()
        self.log.info("draining", grace_s=grace_s)
        try:
            async with asyncio.timeout(grace_s):
                await finish()
        except TimeoutError:
            self.log.warning("grace period over: what still runs is cut", grace_s=grace_s)
        else:
            self.log.info("drained")

    def cut(self, what: str, count: int) -> None:
        """`count` pieces of work (`what`: runs, tool calls, streams) cut by a stop."""
        if count:
            self.cuts.labels(self.service, what).inc(count)
            self.log.warning("cut by the stop", what=what, count=count)
