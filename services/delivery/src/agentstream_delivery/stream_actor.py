"""The I/O side of a stream: one task per (root run, target) drives the state machine.

The task takes inputs from its inbox in order, asks `stream_machine.transition` what to do
and hands the operations to its `Deliverer` (ledger, flood control, error classes); the
outcome `Degraded` goes back into the machine as the input `Degrade`.
Inputs that queued up while a call was in flight are all applied before the next call,
and the resulting operations are coalesced, so a slow or rate-limited chat gets the
newest frame instead of a backlog. The inbox wait ends at the model's `flush_at`, the
per-stream timer: a frame held back by the edit interval goes out even when no more
text arrives. A slow platform only delays its own stream, never the Kafka consumer or
other chats.

What the task does with the platform is its `Dispatch`:

    WAITING   no op to carry out: the inbox or the timer is next
      ops with a final, or the chat's budget free  → CALLING
      previews only, the chat's budget not free     → HOLDING
    HOLDING   previews wait for the chat's budget plus its reserve (`ChatGate.free_at`);
              input keeps being applied and its ops coalesced with them
      a final among the ops (it supersedes the preview of its message) → CALLING
      the budget is free                             → CALLING
    CALLING   the deliverer carries the ops out; a final leaves at the chat's next slot
      done                                           → WAITING

So a final never waits behind a preview that has not left yet, and previews leave a
share of the chat's budget unused for it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import assert_never

import structlog

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters import PlatformAdapter
from agentstream_delivery.deliverer import (
    DEFAULT_LATE_LANDING_S,
    ChatStatus,
    Dead,
    Degraded,
    Delivered,
    Deliverer,
    Failed,
    Outcome,
    Skipped,
)
from agentstream_delivery.delivery_metrics import DeliveryMetrics
from agentstream_delivery.hooks.base import TransformContext
from agentstream_delivery.ledger import Ledger, LedgerScope, MemoryLedger
from agentstream_delivery.platform_ops import Edit, Op, coalesce
from agentstream_delivery.ratelimit import ChatGate
from agentstream_delivery.stream_inputs import Degrade, Finish, StreamInput, Tick
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel, StreamState

Clock = Callable[[], float]
# The inline transform hooks (security filter last) applied to every frame before it leaves.
Outgoing = Callable[[str, TransformContext], Awaitable[str]]


class Dispatch(Enum):
    """What the stream's task is doing with the platform (the module's docstring has its transitions)."""

    WAITING = "waiting"
    HOLDING = "holding"
    CALLING = "calling"


@dataclass(frozen=True)
class StreamKey:
    root_run_id: str
    platform: str
    chat_id: str
    thread_id: str | None = None

    @classmethod
    def of(cls, root_run_id: str, target: ReplyTarget) -> StreamKey:
        return cls(root_run_id, target.platform, target.chat_id, target.thread_id)


class StreamActor:
    def __init__(
        self,
        key: StreamKey,
        target: ReplyTarget,
        adapter: PlatformAdapter,
        log: structlog.stdlib.BoundLogger,
        clock: Clock = time.monotonic,
        observe: DeliveryMetrics | None = None,
        outgoing: Outgoing | None = None,
        *,
        ledger: Ledger | None = None,
        gate: ChatGate | None = None,
        conversation_key: str = "",
        origin: tuple[int, int] | None = None,
        first_segment: int = 0,
        late_landing_s: float = DEFAULT_LATE_LANDING_S,
        predecessor: StreamActor | None = None,
    ) -> None:
        self.key = key
        self.target = target
        self.adapter = adapter
        self.model = StreamModel(adapter.capabilities, msg=first_segment)
        self.log = log.bind(root_run_id=key.root_run_id, platform=key.platform, chat_id=key.chat_id)
        self.clock = clock
        self.outgoing = outgoing
        self.origin = origin  # (partition, offset) of the event that opened the stream: the commit seam
        self._shown: dict[int, str] = {}  # segment → the transformed text the platform shows
        scope = LedgerScope(key.platform, key.chat_id, key.root_run_id, conversation_key)
        self.deliverer = Deliverer(
            scope,
            target,
            adapter,
            gate or ChatGate(0.0, clock),
            ledger or MemoryLedger(),
            self.log,
            observe,
            late_landing_s=late_landing_s,
        )
        self.observe = observe
        self._finish_read_at: float | None = None  # when `run.finished` reached the stream (clock)
        self.closed = asyncio.Event()  # every final op is out; the late-landing re-application may follow
        self._inbox: deque[StreamInput] = deque()
        self._wake = asyncio.Event()
        self.dispatch = Dispatch.WAITING
        self.task: asyncio.Task[None] | None = None
        # The first attempt's stream of a resumed run: its ending message is re-marked first.
        self.predecessor = predecessor

    @property
    def state(self) -> StreamState:
        return self.model.state

    @property
    def message_ids(self) -> dict[int, str]:
        """segment index → platform message id, of the messages that landed."""
        return {s: e.message_id for s, e in self.deliverer.entries.items() if e.message_id is not None}

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self.run(), name=f"stream-{self.key.root_run_id}")
        self.task.add_done_callback(self._report_crash)
        return self.task

    def _report_crash(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.log.error("stream crashed", exc_info=task.exception())

    async def wait_closed(self) -> None:
        """Until the final ops are out (or the task ended some other way); not the re-application."""
        if self.task is None:
            return
        closed = asyncio.ensure_future(self.closed.wait())
        try:
            await asyncio.wait({self.task, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()

    def feed(self, inp: StreamInput) -> None:
        if isinstance(inp, Finish) and self._finish_read_at is None:
            self._finish_read_at = self.clock()
        self._inbox.append(inp)
        self._wake.set()

    async def run(self) -> None:
        try:
            mark = await self._predecessor_mark()
            await self.deliverer.recover()  # after the predecessor: its rows are final now
            if mark is not None:
                self.log.info("partial first attempt re-marked", segment=mark.segment)
                await self._apply_all([mark])
            while not self.model.state.terminal:
                ops = self._step(await self._next_input())
                ops = await self._hold_for_budget(ops + self._drain())
                self.dispatch = Dispatch.CALLING
                await self._apply_all(ops)
                self.dispatch = Dispatch.WAITING
        finally:
            self.closed.set()
        if self.observe is not None and self._finish_read_at is not None:
            self.observe.visible(self.key.platform, self.clock() - self._finish_read_at)
        self.log.info("stream closed", state=self.model.state.value, messages=len(self.message_ids))
        # The task (and so the commit hold on its first event) lives on until no call of
        # unknown outcome can land any more: a crash before then replays the stream.
        await self.deliverer.settle()

    async def _predecessor_mark(self) -> Op | None:
        """Waits until the first attempt's stream is done with the platform (its late-landing
        re-applications included: they must not land after the mark), then its re-mark."""
        before, self.predecessor = self.predecessor, None  # the closed stream is not kept alive by this one
        if before is None or before.task is None:
            return None
        await asyncio.wait({before.task})
        return before.model.on_resume

    def _step(self, inp: StreamInput) -> list[Op]:
        before = self.model.state
        self.model, ops = transition(self.model, inp, self.clock())
        if self.model.state is not before:
            self.log.debug("stream transition", before=before.value, after=self.model.state.value)
        return ops

    async def _apply_all(self, ops: list[Op]) -> None:
        queue = deque(ops)
        while queue:
            outcome = await self._apply(queue.popleft())
            match outcome:
                case Degraded(shown=shown):
                    # The model learns what the platform shows of its open message; the rest of the
                    # queue's previews are dropped by the deliverer, the missing tail comes at the end.
                    queue.extend(self._step(Degrade(shown.get(self.model.msg))))
                case Delivered() | Skipped() | Failed() | Dead():
                    pass  # the ledger has the op's outcome; a dead chat drops the rest by itself
                case _:
                    assert_never(outcome)

    def _drain(self) -> list[Op]:
        """The ops of every input that queued up (during the last call, or while previews were held)."""
        ops: list[Op] = []
        while self._inbox and not self.model.state.terminal:
            ops += self._step(self._inbox.popleft())
        return ops

    async def _hold_for_budget(self, ops: list[Op]) -> list[Op]:
        """HOLDING: previews wait until the chat's budget (and its reserve) allows them.

        They wait here, not at the gate inside the deliverer, so input keeps being applied:
        a newer frame replaces them, and a final supersedes them and leaves at the chat's
        next slot instead of one spacing after them.
        """
        ops = coalesce(ops)
        while ops and not any(op.final for op in ops) and not self.model.state.terminal:
            free_at = self.deliverer.gate.free_at(final=False)
            if self.clock() >= free_at:
                break
            self.dispatch = Dispatch.HOLDING
            flush_at = self.model.flush_at
            if flush_at is not None and self.clock() >= flush_at:
                ops = coalesce(ops + self._step(Tick()))
                continue
            await self._wait_for_input(free_at if flush_at is None else min(free_at, flush_at))
            ops = coalesce(ops + self._drain())
        return ops

    async def _next_input(self) -> StreamInput:
        while True:
            if self._inbox:  # pending inputs first: they may change the frame the timer would send
                return self._inbox.popleft()
            flush_at = self.model.flush_at
            if flush_at is not None and self.clock() >= flush_at:
                return Tick()
            await self._wait_for_input(flush_at)

    async def _wait_for_input(self, until: float | None) -> None:
        """Until an input is fed or the clock reaches `until` (None: no deadline)."""
        if self._inbox:
            return
        self._wake.clear()
        delay = None if until is None else max(0.0, until - self.clock())
        try:
            async with asyncio.timeout(delay):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _apply(self, op: Op) -> Outcome:
        text = await self._outgoing_text(op)
        if text is None:
            return Skipped()
        return await self.deliverer.deliver(replace(op, text=text), text)

    async def _outgoing_text(self, op: Op) -> str | None:
        """The frame as it may leave delivery (hooks applied); None when the platform already shows it.

        Transforms see the whole frame, never a delta, so a secret split across deltas is
        whole when it is redacted. Two frames can become equal after a transform (the
        security filter holds back a token); such a non-final edit is skipped.
        """
        if self.outgoing is None:
            return op.text
        ctx = TransformContext(self.key.platform, self.key.chat_id, self.key.root_run_id, op.segment, op.final)
        text = await self.outgoing(op.text, ctx)
        if isinstance(op, Edit) and not op.final and self._shown.get(op.segment) == text:
            return None
        self._shown[op.segment] = text
        return text

    def describe(self) -> dict[str, object]:
        return {
            "root_run_id": self.key.root_run_id,
            "platform": self.key.platform,
            "chat_id": self.key.chat_id,
            "thread_id": self.key.thread_id,
            "state": self.model.state.value,
            "segment": self.model.msg,
            "message_ids": list(self.message_ids.values()),
            "degraded": self.deliverer.status is ChatStatus.DEGRADED,
        }


class StreamRegistry:
    """Open streams by root run id (one per target)."""

    def __init__(self) -> None:
        self._by_root: dict[str, dict[StreamKey, StreamActor]] = {}

    def add(self, actor: StreamActor) -> bool:
        """Registers and starts the actor; False if that (root run, target) is already open."""
        targets = self._by_root.setdefault(actor.key.root_run_id, {})
        if actor.key in targets:
            return False
        targets[actor.key] = actor
        actor.start()
        return True

    def of(self, root_run_id: str) -> list[StreamActor]:
        return list(self._by_root.get(root_run_id, {}).values())

    def pop(self, root_run_id: str) -> list[StreamActor]:
        return list(self._by_root.pop(root_run_id, {}).values())

    def all(self) -> list[StreamActor]:
        return [a for targets in self._by_root.values() for a in targets.values()]

    def drop(self, moved: Callable[[StreamActor], bool]) -> list[StreamActor]:
        """Forgets the streams `moved` picks (handed over to another consumer); returns them."""
        dropped = [a for a in self.all() if moved(a)]
        for actor in dropped:
            targets = self._by_root[actor.key.root_run_id]
            del targets[actor.key]
            if not targets:
                del self._by_root[actor.key.root_run_id]
        return dropped

    async def cancel_all(self) -> None:
        actors = self.all()
        self._by_root.clear()
        for actor in actors:
            if actor.task is not None:
                actor.task.cancel()
        await asyncio.gather(*(a.task for a in actors if a.task is not None), return_exceptions=True)
