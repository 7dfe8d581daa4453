"""One owner per conversation: its runs happen one after another, never in parallel.

The Kafka handler only hands work over (`submit`, `resume`, `interrupt`, `reset`)
and returns at once, so a long run never blocks the partition. Each run is its own
asyncio task; when it ends, the next queued work starts.

What a message does while a run is active is its double-texting policy (the
request's `double_texting` option, else the assistant's):
- ENQUEUE: waits, then runs, in order;
- INTERRUPT: stops the active run, then runs;
- REJECT: is refused with a notice (the active run goes on);
- COLLECT: waits with every other message that arrives meanwhile, and they run as one
  merged turn; while idle, a COLLECT message waits `collect_window_s` (debounce) for
  more before it starts.

Every run this owner accepted ends with a `run.finished` — also the ones that never
ran (refused, merged into another, dropped at shutdown): `dismiss` reports those.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, assert_never

import structlog

from agentstream.contracts import DoubleTexting, FinishReason, ResumeRun, RunStarted, StartRun
from agentstream.kafka.producer import OutputHeld
from agentstream_runner.context import RunControl

Work = StartRun | ResumeRun
RunFn = Callable[[Work, RunControl], Coroutine[Any, Any, None]]
DEFAULT_COLLECT_WINDOW_S = 1.0


class Dismissal(StrEnum):
    """Why accepted work ends without running."""

    REJECTED = "rejected"  # REJECT policy: a notice tells the user
    MERGED = "merged"  # COLLECT policy: its text runs inside another run
    DROPPED = "dropped"  # the owner closed (shutdown, rebalance, reset) before it ran


PolicyFn = Callable[[StartRun], DoubleTexting]
DismissFn = Callable[[StartRun, Dismissal, str], Coroutine[Any, Any, None]]


class OwnerState(StrEnum):
    IDLE = "idle"  # no run active, none queued
    COLLECTING = "collecting"  # COLLECT messages wait for the debounce window; nothing runs
    RUNNING = "running"  # a run is active (more may be queued)
    CLOSED = "closed"  # the service is stopping or the partition moved: nothing new starts


@dataclass(frozen=True)
class ActiveRun:
    work: Work
    control: RunControl
    task: asyncio.Task[None]


def merge_starts(starts: list[StartRun]) -> StartRun:
    """One turn from several messages: the first run id (its `run.queued` opened the
    stream), all texts in order, the latest message's reply target, options and metadata."""
    first, last = starts[0], starts[-1]
    if len(starts) == 1:
        return first
    return first.model_copy(
        update={
            "text": "\n\n".join(s.text for s in starts if s.text),
            "reply_target": last.reply_target,
            "options": last.options.over(first.options.as_dict()),
            "metadata": {**first.metadata, **last.metadata},
        }
    )


def policy_enqueue(_: StartRun) -> DoubleTexting:
    return DoubleTexting.ENQUEUE


async def dismiss_nothing(start: StartRun, why: Dismissal, detail: str) -> None:
    return None


class Conversation:
    def __init__(
        self,
        key: str,
        run: RunFn,
        policy_for: PolicyFn = policy_enqueue,
        dismiss: DismissFn = dismiss_nothing,
        on_idle: Callable[[str], None] | None = None,
        log: structlog.stdlib.BoundLogger | None = None,
        collect_window_s: float = DEFAULT_COLLECT_WINDOW_S,
        on_output_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.key = key
        self.state = OwnerState.IDLE
        self.partition: int | None = None
        self._run = run
        self._policy_for = policy_for
        self._dismiss = dismiss
        self._on_idle = on_idle
        self._on_output_lost = on_output_lost
        self._collect_window_s = collect_window_s
        self._queue: deque[Work] = deque()
        self._collected: list[StartRun] = []  # COLLECT messages waiting to run as one turn
        self._debounce: asyncio.TimerHandle | None = None
        self._active: ActiveRun | None = None
        # Resumes of the active StartRun's run, until that run ends or turns out `not_started`.
        self._held_resumes: dict[str, ResumeRun] = {}
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._log = (log or structlog.get_logger(__name__)).bind(conversation=key)

    @property
    def active_run_id(self) -> str | None:
        return self._active.work.run_id if self._active else None

    @property
    def active_started(self) -> RunStarted | None:
        return self._active.control.started if self._active else None

    @property
    def queued(self) -> int:
        return len(self._queue) + len(self._collected)

    # -- transitions ---------------------------------------------------------------
    def submit(self, start: StartRun) -> None:
        """A new message, handled by the state and the message's policy."""
        if self.state is OwnerState.CLOSED:
            self._dismiss_soon(start, Dismissal.DROPPED, FinishReason.SHUTDOWN)
            return
        policy = self._policy_for(start)
        running = self.state is OwnerState.RUNNING
        match policy:
            case DoubleTexting.COLLECT:
                self._collected.append(start)
                if not running:
                    self._restart_debounce()  # IDLE/COLLECTING → COLLECTING
                return
            case DoubleTexting.REJECT if running:
                self._dismiss_soon(start, Dismissal.REJECTED, "a run is already in progress")
                return
            case DoubleTexting.INTERRUPT if running:
                self._queue.append(start)
                self.interrupt(None, FinishReason.DOUBLE_TEXTING)
            case DoubleTexting.ENQUEUE | DoubleTexting.REJECT | DoubleTexting.INTERRUPT:
                self._queue.append(start)  # while idle, every policy just runs
            case _:
                assert_never(policy)
        if self.state is not OwnerState.RUNNING:
            self._start_next()

    def resume(self, command: ResumeRun) -> None:
        """A resume waits its turn like ENQUEUE, whatever the policy."""
        if self.state is OwnerState.CLOSED:
            self._log.warning("resume refused: owner closed", run_id=command.run_id)
            return
        active = self._active
        if active is not None and active.work.run_id == command.run_id and isinstance(active.work, StartRun):
            # Either the run is alive here (it was only slow, and declared lost): nothing to resume; or
            # its StartRun was read again and will not start (`RunControl.not_started`): resumed then.
            self._held_resumes[command.run_id] = command
            self._log.info("resume held: the run's start is active here", run_id=command.run_id)
            return
        if command.run_id == self.active_run_id or any(w.run_id == command.run_id for w in self._queue):
            # The run is alive here (it was only slow, and declared lost): nothing to resume.
            self._log.info("resume ignored: the run is active or queued here", run_id=command.run_id)
            return
        self._queue.append(command)
        if self.state is not OwnerState.RUNNING:
            self._start_next()

    def interrupt(self, run_id: str | None, reason: FinishReason) -> bool:
        """Cancel the active run (any, or only `run_id`). True when one was cancelled."""
        active = self._active
        if active is None or (run_id is not None and run_id != active.work.run_id):
            return False
        if active.control.stop_reason is not None:
            return True  # already stopping; the first reason stands
        active.control.stop_reason = reason
        # call_soon, not cancel(): a task created moments ago may not have run its
        # first step; its step is already queued, so it enters the pipeline (whose
        # try/finally reports the ending) before the cancellation lands.
        asyncio.get_running_loop().call_soon(active.task.cancel)
        self._log.info("run interrupted", run_id=active.work.run_id, reason=reason)
        return True

    def reset(self) -> None:
        """A new session: drop what waits, stop the active run; later messages run normally."""
        self._drop_waiting(FinishReason.RESET)
        self.interrupt(None, FinishReason.RESET)

    async def close(self, reason: FinishReason = FinishReason.SHUTDOWN) -> None:
        """→ CLOSED: drop waiting work, stop the active run and wait for every ending."""
        self.state = OwnerState.CLOSED
        self._drop_waiting(reason)
        active = self._active
        if active is not None:
            self.interrupt(None, reason)
            await asyncio.wait({active.task})
        if self._side_tasks:
            await asyncio.wait(set(self._side_tasks))

    # -- internals -----------------------------------------------------------------
    def _drop_waiting(self, reason: FinishReason) -> None:
        if self._debounce is not None:
            self._debounce.cancel()
            self._debounce = None
        dropped = [*self._queue, *self._collected]
        self._queue.clear()
        self._collected.clear()
        for work in dropped:
            if isinstance(work, StartRun):
                self._dismiss_soon(work, Dismissal.DROPPED, reason)
        if dropped:
            self._log.warning("waiting work dropped", run_ids=[w.run_id for w in dropped], reason=reason)
        if self.state is OwnerState.COLLECTING:
            self.state = OwnerState.IDLE

    def _restart_debounce(self) -> None:
        if self._debounce is not None:
            self._debounce.cancel()
        self.state = OwnerState.COLLECTING
        self._debounce = asyncio.get_running_loop().call_later(self._collect_window_s, self._debounce_over)

    def _debounce_over(self) -> None:
        self._debounce = None
        if self.state is OwnerState.COLLECTING:
            self._start_next()

    def _take_collected(self) -> StartRun:
        starts, self._collected = self._collected, []
        merged = merge_starts(starts)
        for other in starts[1:]:
            self._dismiss_soon(other, Dismissal.MERGED, merged.run_id)
        return merged

    def _next_work(self) -> Work | None:
        if self._queue:
            return self._queue.popleft()
        if self._collected:
            return self._take_collected()
        return None

    def _start_next(self) -> None:
        work = self._next_work()
        if work is None:
            self.state = OwnerState.IDLE
            if self._on_idle is not None:
                self._on_idle(self.key)
            return
        if self._debounce is not None:
            self._debounce.cancel()
            self._debounce = None
        control = RunControl()
        task = asyncio.create_task(self._run(work, control), name=f"run:{work.run_id}")
        self._active = ActiveRun(work, control, task)
        self.state = OwnerState.RUNNING
        task.add_done_callback(self._on_run_done)

    def _on_run_done(self, task: asyncio.Task[None]) -> None:
        active, self._active = self._active, None
        run_id = active.work.run_id if active else None
        held = self._held_resumes.pop(run_id, None) if run_id is not None else None
        if held is not None and active is not None and active.control.not_started:
            self._queue.appendleft(held)  # its turn now: the start it waited behind did not run
        elif held is not None:
            self._log.info("resume ignored: the run ran here", run_id=run_id)
        if task.cancelled():
            self._log.warning("run cancelled outside the pipeline", run_id=run_id)
        elif (err := task.exception()) is not None:
            # The pipeline already reported the run as failed; this keeps the traceback.
            self._log.error("run crashed", run_id=run_id, exc_info=err)
            if isinstance(err, OutputHeld) and run_id is not None and self._on_output_lost is not None:
                # The broker refused the run's output (a lost embedded broker): nothing of its end
                # reached anyone, so its start, sent again on the new cluster, must run.
                self._on_output_lost(run_id)
        if self.state is not OwnerState.CLOSED:
            self._start_next()

    def _dismiss_soon(self, start: StartRun, why: Dismissal, detail: str) -> None:
        task = asyncio.create_task(self._dismiss(start, why, detail), name=f"dismiss:{start.run_id}")
        self._side_tasks.add(task)
        task.add_done_callback(self._side_done)

    def _side_done(self, task: asyncio.Task[None]) -> None:
        self._side_tasks.discard(task)
        if not task.cancelled() and (err := task.exception()) is not None:
            self._log.error("could not end a run that did not start", exc_info=err)
