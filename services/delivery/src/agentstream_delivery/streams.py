"""The I/O side of a stream: one task per (root run, target) drives the state machine.

The task takes inputs from its inbox in order, asks `consumer.transition` what to do
and carries the operations out on the adapter. Its wait on the inbox ends at the
model's `flush_at`, which is the per-stream timer: a frame held back by the edit
interval is sent even when no further text arrives. A slow platform only delays its
own stream, never the Kafka consumer or other chats.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters import PlatformAdapter
from agentstream_delivery.consumer import (
    Cadence,
    Edit,
    Op,
    Send,
    StreamInput,
    StreamModel,
    StreamState,
    Tick,
    transition,
)

Clock = Callable[[], float]
OpObserver = Callable[[str, str, bool], None]  # (platform, "send"|"edit", ok)


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
        self, key: StreamKey, target: ReplyTarget, adapter: PlatformAdapter, cadence: Cadence,
        log: structlog.stdlib.BoundLogger, clock: Clock = time.monotonic, observe: OpObserver | None = None,
    ) -> None:
        self.key = key
        self.target = target
        self.adapter = adapter
        self.model = StreamModel(cadence)
        self.log = log.bind(root_run_id=key.root_run_id, platform=key.platform, chat_id=key.chat_id)
        self.clock = clock
        self.observe = observe
        self.message_ids: dict[int, str] = {}  # segment index → platform message id
        self._inbox: deque[StreamInput] = deque()
        self._wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def state(self) -> StreamState:
        return self.model.state

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self.run(), name=f"stream-{self.key.root_run_id}")
        self.task.add_done_callback(self._report_crash)
        return self.task

    def _report_crash(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.log.error("stream crashed", exc_info=task.exception())

    def feed(self, inp: StreamInput) -> None:
        self._inbox.append(inp)
        self._wake.set()

    async def run(self) -> None:
        while not self.model.state.terminal:
            inp = await self._next_input()
            before = self.model.state
            self.model, ops = transition(self.model, inp, self.clock())
            if self.model.state is not before:
                self.log.debug("stream transition", before=before.value, after=self.model.state.value)
            for op in ops:
                await self._apply(op)
        self.log.info("stream closed", state=self.model.state.value, messages=len(self.message_ids))

    async def _next_input(self) -> StreamInput:
        while True:
            if self._inbox:  # pending inputs first: they may change the frame the timer would send
                return self._inbox.popleft()
            flush_at = self.model.flush_at
            if flush_at is not None and self.clock() >= flush_at:
                return Tick()
            self._wake.clear()
            delay = None if flush_at is None else flush_at - self.clock()
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _apply(self, op: Op) -> None:
        kind = "send" if isinstance(op, Send) else "edit"
        try:
            message_id = self.message_ids.get(op.segment)
            if isinstance(op, Edit) and message_id is not None:
                await self.adapter.edit(self.target, message_id, op.text, final=op.final)
            else:
                # An Edit without a message id means its send failed: sending now still shows the text.
                self.message_ids[op.segment] = await self.adapter.send(self.target, op.text, final=op.final)
        except Exception as err:  # the platform's failure must not end the stream (ledger/retries: later)
            self.log.warning("platform call failed", op=kind, segment=op.segment, error=repr(err))
            self._observe(kind, False)
            return
        self._observe(kind, True)

    def _observe(self, kind: str, ok: bool) -> None:
        if self.observe is not None:
            self.observe(self.key.platform, kind, ok)

    def describe(self) -> dict[str, object]:
        return {
            "root_run_id": self.key.root_run_id, "platform": self.key.platform, "chat_id": self.key.chat_id,
            "thread_id": self.key.thread_id, "state": self.model.state.value, "segment": self.model.segment.index,
            "message_ids": list(self.message_ids.values()),
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

    async def cancel_all(self) -> None:
        actors = self.all()
        self._by_root.clear()
        for actor in actors:
            if actor.task is not None:
                actor.task.cancel()
        await asyncio.gather(*(a.task for a in actors if a.task is not None), return_exceptions=True)
