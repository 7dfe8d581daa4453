"""Runs that a runner which died had taken up, found by the assignment's orphan scan (`orphans.taken`).

Their StartRun is read again by the runner assigned their partition (the dead runner's group had not
committed it yet) and must not start the run afresh (docs/decisions.md § Orphaned runs). The scan runs
in the assignment callback, but aiokafka fetches the assigned partitions meanwhile, so a StartRun may
reach its owner before the scan has ended: a run about to start waits for the scans in progress
(`settled`) and then asks `taken`. Bounded: the ids of the last `KNOWN` such runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from agentstream.bounded import RecentIds

KNOWN = 20_000  # as many as the conversations' known run ids (registry.py)


class TakenRuns:
    def __init__(self, known: int = KNOWN) -> None:
        self._ids: RecentIds[str] = RecentIds(known)
        self._scans = 0
        self._settled = asyncio.Event()
        self._settled.set()

    @contextmanager
    def scanning(self) -> Iterator[set[str]]:
        """Around one assignment's scan: the runs it finds taken are added to the yielded set; runs
        about to start wait until it is over, however it ends."""
        found: set[str] = set()
        self._scans += 1
        self._settled.clear()
        try:
            yield found
        finally:
            for run_id in found:
                self._ids.add(run_id)
            self._scans -= 1
            if self._scans == 0:
                self._settled.set()

    async def taken(self, run_id: str) -> bool:
        """Whether a scan found `run_id` taken up by another runner, once no scan is in progress."""
        await self._settled.wait()
        return run_id in self._ids
