"""One owner per conversation: its runs happen one after another, never in parallel.

The Kafka handler only hands work over (`submit`, `interrupt`) and returns at
once, so a long run never blocks the partition. Each run is its own asyncio task;
when it ends, the next queued run starts. What happens to a message that arrives
while a run is active is the conversation's double-texting policy.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import structlog

from agentstream.contracts import StartRun
from agentstream_runner.context import RunControl

RunFn = Callable[[StartRun, RunControl], Coroutine[Any, Any, None]]
SHUTDOWN = "shutdown"


class DoubleTextingPolicy(StrEnum):
    """What a new message does while a run is active (ARCHITECTURE §3)."""

    ENQUEUE = "enqueue"  # wait for the active run, then run (default)
    INTERRUPT = "interrupt"  # stop the active run, then run (later issue)
    REJECT = "reject"  # refuse the new message (later issue)
    COLLECT = "collect"  # debounce and merge queued messages (later issue)


IMPLEMENTED_POLICIES = frozenset({DoubleTextingPolicy.ENQUEUE})


class OwnerState(StrEnum):
    IDLE = "idle"  # no run active, none queued
    RUNNING = "running"  # a run is active (more may be queued)
    CLOSED = "closed"  # the service is stopping: nothing new starts


@dataclass(frozen=True)
class ActiveRun:
    start: StartRun
    control: RunControl
    task: asyncio.Task[None]


class Conversation:
    def __init__(
        self,
        key: str,
        run: RunFn,
        policy: DoubleTextingPolicy = DoubleTextingPolicy.ENQUEUE,
        on_idle: Callable[[str], None] | None = None,
        log: structlog.stdlib.BoundLogger | None = None,
    ) -> None:
        if policy not in IMPLEMENTED_POLICIES:
            raise NotImplementedError(f"double-texting policy {policy.value!r} is not implemented yet")
        self.key = key
        self.policy = policy
        self.state = OwnerState.IDLE
        self._run = run
        self._on_idle = on_idle
        self._queue: deque[StartRun] = deque()
        self._active: ActiveRun | None = None
        self._log = (log or structlog.get_logger(__name__)).bind(conversation=key)

    @property
    def active_run_id(self) -> str | None:
        return self._active.start.run_id if self._active else None

    @property
    def queued(self) -> int:
        return len(self._queue)

    # -- transitions ---------------------------------------------------------------
    def submit(self, start: StartRun) -> None:
        """IDLE → RUNNING (starts now); RUNNING → RUNNING (per policy); CLOSED → refused."""
        if self.state is OwnerState.CLOSED:
            self._log.warning("run refused: service stopping", run_id=start.run_id)
            return
        match self.policy:
            case DoubleTextingPolicy.ENQUEUE:
                self._queue.append(start)
        if self.state is OwnerState.IDLE:
            self._start_next()

    def interrupt(self, run_id: str | None, reason: str) -> bool:
        """Cancel the active run (any, or only `run_id`). True when one was cancelled."""
        active = self._active
        if active is None or (run_id is not None and run_id != active.start.run_id):
            return False
        active.control.stop_reason = reason
        # call_soon, not cancel(): a task created moments ago may not have run its
        # first step; its step is already queued, so it enters the pipeline (whose
        # try/finally reports `interrupted`) before the cancellation lands.
        asyncio.get_running_loop().call_soon(active.task.cancel)
        self._log.info("run interrupted", run_id=active.start.run_id, reason=reason)
        return True

    async def close(self, reason: str = SHUTDOWN) -> None:
        """→ CLOSED: drop queued runs, interrupt the active one and wait for its ending."""
        self.state = OwnerState.CLOSED
        dropped = [s.run_id for s in self._queue]
        self._queue.clear()
        if dropped:
            self._log.warning("queued runs dropped", run_ids=dropped, reason=reason)
        active = self._active
        if active is not None:
            self.interrupt(None, reason)
            await asyncio.wait({active.task})

    # -- internals -----------------------------------------------------------------
    def _start_next(self) -> None:
        if not self._queue:
            self.state = OwnerState.IDLE
            if self._on_idle is not None:
                self._on_idle(self.key)
            return
        start = self._queue.popleft()
        control = RunControl()
        task = asyncio.create_task(self._run(start, control), name=f"run:{start.run_id}")
        self._active = ActiveRun(start, control, task)
        self.state = OwnerState.RUNNING
        task.add_done_callback(self._on_run_done)

    def _on_run_done(self, task: asyncio.Task[None]) -> None:
        run_id = self._active.start.run_id if self._active else None
        self._active = None
        if task.cancelled():
            self._log.warning("run cancelled outside the pipeline", run_id=run_id)
        elif (err := task.exception()) is not None:
            # The pipeline already reported the run as failed; this keeps the traceback.
            self._log.error("run crashed", run_id=run_id, exc_info=err)
        if self.state is not OwnerState.CLOSED:
            self._start_next()


class Conversations:
    """The owners of the conversations this runner has work for."""

    def __init__(
        self,
        run: RunFn,
        policy: DoubleTextingPolicy = DoubleTextingPolicy.ENQUEUE,
        log: structlog.stdlib.BoundLogger | None = None,
    ) -> None:
        self._run = run
        self._policy = policy
        self._log = log
        self._by_key: dict[str, Conversation] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def get(self, key: str) -> Conversation | None:
        return self._by_key.get(key)

    def submit(self, start: StartRun) -> None:
        key = start.conversation_key
        owner = self._by_key.get(key)
        if owner is None:
            owner = Conversation(key, self._run, self._policy, on_idle=self._forget, log=self._log)
            self._by_key[key] = owner
        owner.submit(start)

    def interrupt(self, key: str, run_id: str | None, reason: str) -> bool:
        owner = self._by_key.get(key)
        return owner is not None and owner.interrupt(run_id, reason)

    async def close(self, reason: str = SHUTDOWN) -> None:
        owners = list(self._by_key.values())
        await asyncio.gather(*(o.close(reason) for o in owners))
        self._by_key.clear()

    def _forget(self, key: str) -> None:
        # Idle owners hold nothing worth keeping; the next message creates a new one.
        self._by_key.pop(key, None)
