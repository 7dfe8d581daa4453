"""The owners of the conversations this runner has work for, by conversation key.

Creates an owner (`conversation.Conversation`) on first work, forgets it when idle,
and closes them all at shutdown, or those of partitions that moved to another runner.
Remembers the run ids of the last `known_runs` StartRuns (an idle owner is forgotten, so
not in the owner): a StartRun repeated by ingress after a crash (same derived run id,
docs/decisions.md) is ignored, whether its run waits, runs or has finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial

import structlog

from agentstream.bounded import RecentIds
from agentstream.contracts import FinishReason, ResumeRun, RunStarted, StartRun
from agentstream_runner.conversations.owner import (
    DEFAULT_COLLECT_WINDOW_S,
    Conversation,
    DismissFn,
    PolicyFn,
    RunFn,
    dismiss_nothing,
    policy_enqueue,
)

# ~1.5 MB of ids: covers ingress's repeats (a batch re-read after its restart, seconds later)
# at a thousand runs a second.
KNOWN_RUNS = 20_000


class Conversations:
    """The owners of the conversations this runner has work for."""

    def __init__(
        self,
        run: RunFn,
        policy_for: PolicyFn = policy_enqueue,
        dismiss: DismissFn = dismiss_nothing,
        log: structlog.stdlib.BoundLogger | None = None,
        collect_window_s: float = DEFAULT_COLLECT_WINDOW_S,
        known_runs: int = KNOWN_RUNS,
    ) -> None:
        # Every owner gets the same collaborators; only its key differs.
        self._new_owner = partial(
            Conversation,
            run=run,
            policy_for=policy_for,
            dismiss=dismiss,
            on_idle=self._forget,
            log=log,
            collect_window_s=collect_window_s,
            on_output_lost=self._forget_run,
        )
        self._by_key: dict[str, Conversation] = {}
        self._gone = asyncio.Event()  # set whenever an owner goes
        self._known: RecentIds[str] = RecentIds(known_runs)
        self._log = log or structlog.get_logger(__name__)

    def __len__(self) -> int:
        return len(self._by_key)

    def get(self, key: str) -> Conversation | None:
        return self._by_key.get(key)

    def owner(self, key: str, partition: int | None = None) -> Conversation:
        owner = self._by_key.get(key)
        if owner is None:
            owner = self._new_owner(key)
            self._by_key[key] = owner
        if partition is not None:
            owner.partition = partition
        return owner

    def _forget_run(self, run_id: str) -> None:
        self._known.forget(run_id)

    def submit(self, start: StartRun, partition: int | None = None) -> bool:
        """Hand `start` to its owner; False (and nothing done) for a run id already known."""
        if not self._known.add(start.run_id):
            self._log.info("start ignored: run already known", run_id=start.run_id, conversation=start.conversation_key)
            return False
        self.owner(start.conversation_key, partition).submit(start)
        return True

    def resume(self, command: ResumeRun, partition: int | None = None) -> None:
        self.owner(command.conversation_key, partition).resume(command)

    def interrupt(self, key: str, run_id: str | None, reason: FinishReason) -> bool:
        owner = self._by_key.get(key)
        return owner is not None and owner.interrupt(run_id, reason)

    def reset(self, key: str) -> None:
        owner = self._by_key.get(key)
        if owner is not None:
            owner.reset()

    def runs(self) -> tuple[int, int]:
        """(active, waiting) runs of every conversation: what a stop would end now."""
        owners = self._by_key.values()
        return sum(o.active_run_id is not None for o in owners), sum(o.queued for o in owners)

    def active_runs(self) -> set[str]:
        """The run ids running here now (each a root run: StartRun and ResumeRun start those)."""
        return {run_id for o in self._by_key.values() if (run_id := o.active_run_id) is not None}

    def started_runs(self) -> list[RunStarted]:
        """The `run.started` of every run running here that has published one."""
        return [s for o in self._by_key.values() if (s := o.active_started) is not None]

    def of_partitions(self, partitions: Iterable[int]) -> list[Conversation]:
        wanted = set(partitions)
        return [o for o in self._by_key.values() if o.partition in wanted]

    async def idle(self, partitions: Iterable[int] | None = None) -> None:
        """Until no conversation (of `partitions`, when given) has a run, active or waiting; owners
        forget themselves when idle."""
        wanted = None if partitions is None else set(partitions)
        while self._by_key if wanted is None else self.of_partitions(wanted):
            self._gone.clear()
            await self._gone.wait()

    async def close(self, reason: FinishReason = FinishReason.SHUTDOWN) -> None:
        await self._close(list(self._by_key.values()), reason)

    async def close_partitions(
        self, partitions: Iterable[int], reason: FinishReason = FinishReason.REBALANCED
    ) -> list[str]:
        """Stop the conversations of partitions this runner no longer owns; their keys."""
        owners = self.of_partitions(partitions)
        await self._close(owners, reason)
        return [o.key for o in owners]

    async def _close(self, owners: list[Conversation], reason: FinishReason) -> None:
        await asyncio.gather(*(o.close(reason) for o in owners))
        for o in owners:
            self._by_key.pop(o.key, None)
        self._gone.set()

    def _forget(self, key: str) -> None:
        # Idle owners hold nothing worth keeping; the next message creates a new one.
        self._by_key.pop(key, None)
        self._gone.set()
