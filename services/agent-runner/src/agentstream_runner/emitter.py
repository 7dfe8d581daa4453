"""The event emitter of one root run: identity fields and a strictly increasing seq.

Ingress emitted `run.queued` with seq 0, so the runner starts at 1. Events are
published one at a time under a lock and the seq is taken inside it, so the order
on the (single-partition-per-key) `events` topic is the seq order even when the
coalescer's timer and the pipeline emit concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentstream.contracts import EventBase, StartRun

EventT = TypeVar("EventT", bound=EventBase)
Publish = Callable[[EventBase], Awaitable[None]]

FIRST_RUNNER_SEQ = 1


class _Sequence:
    """The seq counter of one root run, shared with its child runs' emitters."""

    def __init__(self, first: int) -> None:
        self.next = first
        self.lock = asyncio.Lock()


class RunEmitter:
    def __init__(
        self, publish: Publish, *, run_id: str, conversation_key: str, epoch: int = 0, first_seq: int = FIRST_RUNNER_SEQ
    ) -> None:
        self._publish = publish
        self._identity: dict[str, Any] = {
            "run_id": run_id, "root_run_id": run_id, "parent_run_id": None, "depth": 0,
            "conversation_key": conversation_key, "epoch": epoch,
        }
        self._seq = _Sequence(first_seq)

    def child(self, run_id: str) -> RunEmitter:
        """The emitter of a delegated child run: same root stream and seq, one level deeper."""
        child = RunEmitter.__new__(RunEmitter)
        child._publish = self._publish
        child._identity = {**self._identity, "run_id": run_id, "parent_run_id": self.run_id,
                           "depth": self.depth + 1}
        child._seq = self._seq
        return child

    @property
    def depth(self) -> int:
        return int(self._identity["depth"])

    @property
    def root_run_id(self) -> str:
        return str(self._identity["root_run_id"])

    @property
    def next_seq(self) -> int:
        return self._seq.next

    @classmethod
    def for_start(cls, start: StartRun, publish: Publish, epoch: int = 0) -> RunEmitter:
        return cls(publish, run_id=start.run_id, conversation_key=start.conversation_key, epoch=epoch)

    @property
    def run_id(self) -> str:
        return str(self._identity["run_id"])

    async def emit(self, event_type: type[EventT], **fields: Any) -> EventT:
        async with self._seq.lock:
            event = event_type(**self._identity, seq=self._seq.next, **fields)
            # Taken even if the publish fails: seq must only increase, gaps are fine.
            self._seq.next += 1
            await self._publish(event)
        return event
