"""Runs that a runner which died had taken up, found by the assignment's orphan scan (`orphans.taken`).

Their StartRun is read again by the runner assigned their partition (the dead runner's group had not
committed it yet) and must not start the run afresh (docs/decisions.md § Orphaned runs). The scan runs
in the assignment callback, but aiokafka fetches the assigned partitions meanwhile, so a StartRun may
reach its owner before the scan has ended: a run about to start waits for the scans in progress
(`settled`) and then asks `taken`. Bounded: the ids of the last `KNOWN` such runs.

The same holds for a ResumeRun read again after its resume had begun: the scan ends that resume
`runner_lost` and notes the seq it ended at (`resume_began`); a resume about to load its checkpoint
waits for the scans and asks `resumed_up_to`, so it never continues from a checkpoint below it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from agentstream.bounded import RecentIds

KNOWN = 20_000  # as many as the conversations' known run ids (registry.py)


class TakenRuns:
    def __init__(self, known: int = KNOWN) -> None:
        self._ids: RecentIds[str] = RecentIds(known)
        self._known = known
        self._resumes_ended: OrderedDict[str, int] = OrderedDict()  # run id → seq its begun resume ended at
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

    def resume_began(self, run_id: str, ended_at: int) -> None:
        """During a scan: `run_id`'s ResumeRun is read again, its resume had begun on the runner that
        died, and the scan ended that resume with the seq `ended_at`."""
        self._resumes_ended[run_id] = max(ended_at, self._resumes_ended.pop(run_id, ended_at))
        while len(self._resumes_ended) > self._known:
            self._resumes_ended.popitem(last=False)

    async def resumed_up_to(self, run_id: str) -> int | None:
        """The seq a begun resume of `run_id` was ended at (a resume continues only from a checkpoint
        at or past it), once no scan is in progress; None when no scan found one."""
        await self._settled.wait()
        return self._resumes_ended.get(run_id)
